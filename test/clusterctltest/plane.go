package clusterctltest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// Plane is one management cluster of a move test with no node: a local
// control plane with Cluster API and captf installed by clusterctl init,
// their managers run as host processes.
type Plane struct {
	Name       string
	Env        *framework.Env
	F          *framework.Fixture
	Dyn        dynamic.Interface
	Kubeconfig string
	// CAPI is Cluster API's core manager.
	CAPI *controlplane.CAPIManager
}

// StartPlane starts a control plane with kube-controller-manager, runs
// `clusterctl init --infrastructure terraform` into it with the
// configuration config, removes the webhook configurations that point at
// the Services of pods that never run here (no kubelet), and starts
// Cluster API's core manager, then captf's manager (captfBin) as its
// ServiceAccount with its webhook (captf's configuration pointed at it),
// in that order (captf discovers Cluster API's resources at start). root
// is the repository root.
func StartPlane(t *testing.T, name, root, config, captfBin string) *Plane {
	t.Helper()
	ctx := framework.Context(t)
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: filepath.Join(root, "bin"), ControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	env := &framework.Env{CP: cp, Root: root, Admin: cp.RestConfig(controlplane.Admin), CaptfBinary: captfBin}
	if env.Kube, err = kubernetes.NewForConfig(env.Admin); err != nil {
		t.Fatal(err)
	}
	if env.Captf, err = versioned.NewForConfig(env.Admin); err != nil {
		t.Fatal(err)
	}
	p := &Plane{Name: name, Env: env, Kubeconfig: cp.KubeconfigPath(controlplane.Admin)}
	if p.Dyn, err = dynamic.NewForConfig(env.Admin); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := Run(ctx, t, root, config, nil, "init", "--kubeconfig", p.Kubeconfig, "--infrastructure", "terraform")
	if err != nil {
		t.Fatalf("clusterctl init into the %s: %v\n%s%s", name, err, stdout, stderr)
	}
	if err := RemoveWebhooks(ctx, env.Kube, ""); err != nil {
		t.Fatal(err)
	}
	// The trust-boundary policy came with the components (B3).
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "captf-trust-boundary", metav1.GetOptions{}); err != nil {
		t.Fatalf("the %s's trust-boundary policy binding: %v", name, err)
	}

	p.CAPI = StartCAPI(t, cp, root, name)
	certDir, ca := framework.WebhookCert(t)
	m := env.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookCertDir: certDir})
	env.InstallWebhook(t, m, ca)
	p.F = &framework.Fixture{T: t, Env: env, Ctx: ctx, Manager: m, Settle: 3 * time.Minute}
	t.Logf("the %s: control plane, clusterctl init, Cluster API's and captf's managers in %s", name, time.Since(start).Round(time.Millisecond))
	return p
}

// StartCAPI starts Cluster API's core manager as a host process on cp
// (its Deployment's image cannot be pulled offline) and stops it when
// the test ends, printing the end of its log if the test failed.
func StartCAPI(t *testing.T, cp *controlplane.ControlPlane, root, name string) *controlplane.CAPIManager {
	t.Helper()
	capi, err := cp.StartCAPI(framework.Context(t), controlplane.CAPIOptions{BinDir: filepath.Join(root, "bin")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of the %s's Cluster API manager log (%s):\n%s", name, capi.LogPath, capi.LogTail(6000))
		}
		capi.Stop()
	})
	return capi
}

// RemoveWebhooks deletes every validating and mutating webhook
// configuration but the one named keep ("" for none).
func RemoveWebhooks(ctx context.Context, kube kubernetes.Interface, keep string) error {
	adm := kube.AdmissionregistrationV1()
	vwcs, err := adm.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, w := range vwcs.Items {
		if w.Name == keep {
			continue
		}
		if err := adm.ValidatingWebhookConfigurations().Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	mwcs, err := adm.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, w := range mwcs.Items {
		if w.Name == keep {
			continue
		}
		if err := adm.MutatingWebhookConfigurations().Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// Create creates obj (gvr) in ns.
func (p *Plane) Create(t *testing.T, gvr schema.GroupVersionResource, ns string, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u, err := p.Dyn.Resource(gvr).Namespace(ns).Create(framework.Context(t), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Get reads gvr ns/name.
func (p *Plane) Get(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return p.Dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// Secret creates s.
func (p *Plane) Secret(t *testing.T, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	s, err := p.Env.Kube.CoreV1().Secrets(s.Namespace).Create(framework.Context(t), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Object reads kind/name: its metadata and status.
func Object(api versioned.Interface, ns, kind, name string) (metav1.Object, *v1alpha1.WorkloadStatus, error) {
	c := api.InfrastructureV1alpha1()
	switch kind {
	case v1alpha1.KindTerraformCluster:
		o, err := c.TerraformClusters(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return o, &o.Status, nil
	case v1alpha1.KindTerraformMachine:
		o, err := c.TerraformMachines(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return o, &o.Status, nil
	case v1alpha1.KindTerraformMachinePool:
		o, err := c.TerraformMachinePools(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return o, &o.Status, nil
	}
	return nil, nil, fmt.Errorf("unknown kind %s", kind)
}

// Object reads kind/name in the plane.
func (p *Plane) Object(ns, kind, name string) (metav1.Object, *v1alpha1.WorkloadStatus, error) {
	return Object(p.Env.Captf, ns, kind, name)
}

// Status reads kind/name's status.
func (p *Plane) Status(t *testing.T, ns, kind, name string) *v1alpha1.WorkloadStatus {
	t.Helper()
	_, st, err := p.Object(ns, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// WaitStatus waits until ok accepts kind/name's status and returns it.
func (p *Plane) WaitStatus(t *testing.T, ns, kind, name, what string, ok func(*v1alpha1.WorkloadStatus) (bool, string)) *v1alpha1.WorkloadStatus {
	t.Helper()
	return WaitStatus(p.F, p.Name+": "+kind+" "+name+": "+what, func() (*v1alpha1.WorkloadStatus, error) {
		_, st, err := p.Object(ns, kind, name)
		return st, err
	}, ok)
}

// WaitStatus waits through f until ok accepts the status read returns,
// and returns it; a failure names what and the status's conditions.
func WaitStatus(f *framework.Fixture, what string, read func() (*v1alpha1.WorkloadStatus, error), ok func(*v1alpha1.WorkloadStatus) (bool, string)) *v1alpha1.WorkloadStatus {
	f.T.Helper()
	var got *v1alpha1.WorkloadStatus
	f.WaitFor(what, func() (bool, string) {
		st, err := read()
		if err != nil {
			return false, err.Error()
		}
		got = st
		done, msg := ok(st)
		return done, msg + "; " + framework.Describe(st.Conditions)
	})
	return got
}

// IsProvisioned reports status.initialization.provisioned.
func IsProvisioned(st *v1alpha1.WorkloadStatus) bool {
	return st.Initialization != nil && ptr.Deref(st.Initialization.Provisioned, false)
}

// WaitProvisioned waits until kind/name is provisioned.
func (p *Plane) WaitProvisioned(t *testing.T, ns, kind, name string) {
	t.Helper()
	p.WaitStatus(t, ns, kind, name, "provisioned", func(st *v1alpha1.WorkloadStatus) (bool, string) {
		return IsProvisioned(st), fmt.Sprintf("initialization %+v", st.Initialization)
	})
}
