package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/test/controlplane"
)

// The manifests' names (manifests/manager, manifests/rbac).
const (
	systemNamespace = "captf-system"
	managerName     = "captf-manager"
	// shippedImage is the image manifests/ names, for the manager and
	// --runner-image; the overlay replaces both with captfImage.
	shippedImage = "ghcr.io/captf/captf:latest"
	captfImage   = "captf.local/captf:dev"
)

// overlay is the kustomization the test deploys: manifests/ as it ships,
// with the local image for the manager and its --runner-image (J5: keep
// them equal, docs/deploy.md "The image"), and the self-signed webhook
// certificate of docs/deploy.md: the Secret captf-webhook-cert and the CA
// in the caBundle of each of the validating configuration's four webhooks
// (identities and the three template kinds) and of the mutating one's
// (TerraformPlans, O8); and, as docs/deploy.md shows,
// --webhook-client-ca with the CA of the client certificate the control
// plane's AdmissionConfiguration makes kube-apiserver present (a ConfigMap
// mounted into the manager, SPEC B14). No other flag is tuned: a rotation
// reaches the mirrors at once through the source watch (SPEC P2), at the
// default periods.
const overlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
images:
  - name: ghcr.io/captf/captf
    newName: captf.local/captf
    newTag: dev
generatorOptions:
  disableNameSuffixHash: true
secretGenerator:
  - name: captf-webhook-cert
    namespace: captf-system
    type: kubernetes.io/tls
    files:
      - tls.crt
      - tls.key
configMapGenerator:
  - name: captf-webhook-client-ca
    namespace: captf-system
    files:
      - ca.crt
patches:
  - target: {group: apps, version: v1, kind: Deployment, name: captf-manager}
    patch: |-
      - op: test
        path: /spec/template/spec/containers/0/args/8
        value: --runner-image=%[2]s
      - op: replace
        path: /spec/template/spec/containers/0/args/8
        value: --runner-image=%[3]s
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --webhook-client-ca=/etc/captf/webhook-client-ca/ca.crt
      - op: add
        path: /spec/template/spec/containers/0/volumeMounts/-
        value: {name: webhook-client-ca, mountPath: /etc/captf/webhook-client-ca, readOnly: true}
      - op: add
        path: /spec/template/spec/volumes/-
        value: {name: webhook-client-ca, configMap: {name: captf-webhook-client-ca}}
  - target: {group: admissionregistration.k8s.io, version: v1, kind: ValidatingWebhookConfiguration, name: captf}
    patch: |-
      - op: add
        path: /webhooks/0/clientConfig/caBundle
        value: %[4]s
      - op: add
        path: /webhooks/1/clientConfig/caBundle
        value: %[4]s
      - op: add
        path: /webhooks/2/clientConfig/caBundle
        value: %[4]s
      - op: add
        path: /webhooks/3/clientConfig/caBundle
        value: %[4]s
  - target: {group: admissionregistration.k8s.io, version: v1, kind: MutatingWebhookConfiguration, name: captf}
    patch: |-
      - op: add
        path: /webhooks/0/clientConfig/caBundle
        value: %[4]s
`

// deployManager applies manifests/ through a kustomize overlay in a
// temporary directory (kubectl apply -k) and waits until both replicas are
// available and one holds the leader Lease.
func (e *env) deployManager(ctx context.Context, t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	caPEM, certPEM, keyPEM, err := certs.Generate([]string{
		"captf-webhook.captf-system.svc", "captf-webhook.captf-system.svc.cluster.local",
	}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	clientCA, err := os.ReadFile(e.cp.WebhookClient.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), clientCA, 0o600); err != nil {
		t.Fatal(err)
	}
	// kustomize takes a base by relative path.
	rel, err := filepath.Rel(dir, filepath.Join(e.root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(overlay, rel, shippedImage, captfImage, base64.StdEncoding.EncodeToString(caPEM))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	e.kubectl(ctx, t, "apply", "-k", dir)

	start := time.Now()
	e.waitFor(ctx, t, 5*time.Minute, "the manager Deployment with 2 available replicas", func() (bool, string) {
		d, err := e.kube.AppsV1().Deployments(systemNamespace).Get(ctx, managerName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2,
			fmt.Sprintf("available %d, updated %d; pods: %s", d.Status.AvailableReplicas, d.Status.UpdatedReplicas, e.podSummary(ctx, systemNamespace))
	})
	t.Logf("manager: 2 replicas available %s after kubectl apply -k", time.Since(start).Round(time.Millisecond))

	// Leader election: one of the two pods holds the Lease.
	e.waitLeader(ctx, t, "a replica holding the leader Lease", "")
	t.Logf("manager: %s holds the Lease %s/%s", e.leader, systemNamespace, managerName)
}

// waitLeader waits until a manager pod other than notPod holds the leader
// Lease (its holder identity is "<pod>_<uuid>") and records it in e.leader.
func (e *env) waitLeader(ctx context.Context, t *testing.T, what, notPod string) {
	t.Helper()
	e.waitFor(ctx, t, 2*time.Minute, what, func() (bool, string) {
		lease, err := e.kube.CoordinationV1().Leases(systemNamespace).Get(ctx, managerName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		pods := e.managerPods(ctx, t)
		for _, p := range pods {
			if p.Name != notPod && strings.HasPrefix(holder, p.Name+"_") {
				e.leader = p.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("holder %q, pods %v", holder, podNames(pods))
	})
}

// managerPods are the manager's running pods.
func (e *env) managerPods(ctx context.Context, t *testing.T) []corev1.Pod {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "captf", "app.kubernetes.io/component": "manager"})
	list, err := e.kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

func podNames(pods []corev1.Pod) []string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name)
	}
	return n
}

// podSummary is one line per pod of ns: name, phase, and why a container
// waits, for failure messages.
func (e *env) podSummary(ctx context.Context, ns string) string {
	list, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range list.Items {
		fmt.Fprintf(&b, "[%s %s", p.Name, p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " %s:%s %s", cs.Name, w.Reason, w.Message)
			}
			if x := cs.State.Terminated; x != nil && x.ExitCode != 0 {
				fmt.Fprintf(&b, " %s:exit %d %s", cs.Name, x.ExitCode, x.Reason)
			}
		}
		b.WriteString("] ")
	}
	return b.String()
}

// deployFakeCloud applies test/e2e/manifests/fakecloud.yaml (what make run
// applies too) and waits until the fake cloud answers.
func (e *env) deployFakeCloud(ctx context.Context, t *testing.T) {
	t.Helper()
	e.kubectl(ctx, t, "apply", "-f", filepath.Join(e.root, "test", "e2e", "manifests", "fakecloud.yaml"))
	e.waitFor(ctx, t, 3*time.Minute, "the fake cloud Deployment available", func() (bool, string) {
		d, err := e.kube.AppsV1().Deployments(cloudNamespace).Get(ctx, "fakecloud", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return deploymentAvailable(d), e.podSummary(ctx, cloudNamespace)
	})
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.AvailableReplicas >= 1 && d.Status.ObservedGeneration == d.Generation
}

// kubectl runs bin/kubectl as the admin and fails the test on an error.
func (e *env) kubectl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(e.root, "bin", "kubectl"),
		append([]string{"--kubeconfig", e.cp.KubeconfigPath(controlplane.Admin)}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
