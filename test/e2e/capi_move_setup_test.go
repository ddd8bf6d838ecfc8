package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/controlplane"
)

// capiNamespaces hold the Deployments clusterctl init installs for Cluster
// API's core and kubeadm providers: their images cannot be pulled here
// (no network), so they are scaled to 0 and Cluster API's core manager
// runs as a host process instead (bin/capi-manager).
var capiNamespaces = []string{"capi-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system"}

// startClusterctl is start() with captf installed by `clusterctl init
// --infrastructure terraform` from the local repository (SPEC K10) instead
// of kubectl apply -k: the manager's image and --runner-image are the
// local image, through clusterctl's image override and the components'
// variable CAPTF_MANAGER_IMAGE (docs/deploy.md, "With clusterctl"). The
// test stands in for cert-manager, whose controllers cannot be built here:
// it creates the Secret captf-webhook-cert and sets the webhook
// configurations' caBundle, as docs/deploy.md says an operator can.
// Cluster API's Deployments are scaled to 0 and their webhook
// configurations removed; its core manager runs as a host process. It
// returns the repository's configuration file, for clusterctl move.
func startClusterctl(ctx context.Context, t *testing.T) (*env, *controlplane.NodeForTest, string) {
	t.Helper()
	e, cp := startNode(ctx, t)
	repo := clusterctltest.Repository(t, e.root, cp.Dir)
	base := filepath.Join(repo, "clusterctl.yaml")
	config := clusterctltest.ImageConfig(t, base, "captf.local", "dev")
	begin := time.Now()
	stdout, stderr, err := clusterctltest.Run(ctx, t, e.root, config, []string{"CAPTF_MANAGER_IMAGE=" + captfImage},
		"init", "--kubeconfig", cp.KubeconfigPath(controlplane.Admin), "--infrastructure", "terraform")
	if err != nil {
		t.Fatalf("clusterctl init: %v\n%s%s", err, stdout, stderr)
	}
	e.standInForCertManager(ctx, t)
	for _, ns := range capiNamespaces {
		ds, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds.Items {
			if _, err := e.kube.AppsV1().Deployments(ns).Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := clusterctltest.RemoveWebhooks(ctx, e.kube, "captf"); err != nil {
		t.Fatal(err)
	}
	if e.capi, err = cp.StartCAPI(ctx, controlplane.CAPIOptions{BinDir: filepath.Join(e.root, "bin")}); err != nil {
		t.Fatalf("starting Cluster API's core manager: %v", err)
	}
	t.Cleanup(e.capi.Stop)
	t.Logf("clusterctl init, the certificate, Cluster API's core manager in %s", time.Since(begin).Round(time.Millisecond))
	e.deployFakeCloud(ctx, t)
	return e, cp, base
}

// standInForCertManager does what cert-manager would: the Secret
// captf-webhook-cert for the webhook's Service, and its CA in the
// caBundle of every webhook of captf's two configurations.
func (e *env) standInForCertManager(ctx context.Context, t *testing.T) {
	t.Helper()
	caPEM, certPEM, keyPEM, err := certs.Generate([]string{
		"captf-webhook.captf-system.svc", "captf-webhook.captf-system.svc.cluster.local",
	}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Secrets(systemNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "captf-webhook-cert", Namespace: systemNamespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": caPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	adm := e.kube.AdmissionregistrationV1()
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, "captf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.CABundle = caPEM
	}
	if _, err := adm.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := adm.MutatingWebhookConfigurations().Get(ctx, "captf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig.CABundle = caPEM
	}
	if _, err := adm.MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// managerReady (K10): the Deployment clusterctl installed is available
// with both replicas, runs the local image for the container and
// --runner-image (J5), one pod holds the leader Lease, and each pod's
// /readyz answers 200 (asked at the pod's address from this host).
func (e *env) managerReady(ctx context.Context, t *testing.T) {
	start := time.Now()
	e.waitFor(ctx, t, 5*time.Minute, "the manager Deployment installed by clusterctl with 2 available replicas", func() (bool, string) {
		d, err := e.kube.AppsV1().Deployments(systemNamespace).Get(ctx, managerName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2 && d.Status.ObservedGeneration == d.Generation,
			fmt.Sprintf("available %d, updated %d; pods: %s", d.Status.AvailableReplicas, d.Status.UpdatedReplicas, e.podSummary(ctx, systemNamespace))
	})
	t.Logf("K10: the manager installed by clusterctl init is available %s after the step began", time.Since(start).Round(time.Millisecond))
	d, err := e.kube.AppsV1().Deployments(systemNamespace).Get(ctx, managerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Labels[clusterctltest.LabelProvider]; got != clusterctltest.ProviderLabel {
		t.Errorf("the Deployment's %s=%q: not installed by clusterctl", clusterctltest.LabelProvider, got)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != captfImage || !slices.Contains(c.Args, "--runner-image="+captfImage) {
		t.Errorf("the Deployment runs image %q with args %v, want %s for both (J5)", c.Image, c.Args, captfImage)
	}
	e.waitLeader(ctx, t, "a replica holding the leader Lease", "")
	for _, p := range e.managerPods(ctx, t) {
		code, body := getURL(ctx, "http://"+p.Status.PodIP+":8081/readyz")
		if code != http.StatusOK {
			t.Errorf("K10: /readyz of %s: %d %s", p.Name, code, body)
		}
	}
	t.Logf("K10: %s holds the Lease; both pods' /readyz answer 200", e.leader)
}

func getURL(ctx context.Context, url string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}
