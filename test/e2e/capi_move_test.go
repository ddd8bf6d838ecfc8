package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/fakecloud"
)

// TestClusterctlMoveOnNode is issue 22's end-to-end proof of K10, K11 and
// K12 with real Jobs: a round trip between two management clusters, so
// the node (one per machine, registered to one API server) never moves.
//
//   - Plane A is the node's control plane, with Cluster API and captf
//     installed by `clusterctl init --infrastructure terraform` from the
//     local repository (startClusterctl: the test stands in for
//     cert-manager; Cluster API's Deployments cannot pull their images
//     offline, so they are scaled to 0 and its core manager runs as a host
//     process). captf's manager runs in-cluster: its Deployment becomes
//     available, a replica leads, /readyz answers (K10).
//   - A Cluster with a TerraformCluster and a control-plane Machine with a
//     TerraformMachine are provisioned by OpenTofu Jobs on the node against
//     the fake cloud. The workload cluster clusterctl move requires (the
//     Machine's nodeRef, the control plane initialized) is plane A itself:
//     a Node object with the machine's provider ID, cordoned and tainted.
//   - Plane B has no node (clusterctltest.StartPlane: clusterctl init,
//     Cluster API's and captf's managers as host processes).
//   - The operator copies the identity's source Secret to B and runs
//     `clusterctl move` A -> B, then B -> A (the source Secret is still in
//     A), as the admin (system:masters: B3). After each move: no Job in
//     either plane, the fake cloud holds exactly what it held and no Job
//     reached it; the copies adopted their state (StateAdopted, Ready, the
//     same endpoint, provider ID and outputs; new UIDs: K11's marks are not
//     trusted across a UID change, the state's are); the state Secrets are
//     in the target, owned by the copies, and gone from the source; the
//     identity is in the target and its source Secret only where the
//     operator put it.
//   - Back in A, a spec change applies once: one apply Job of the new
//     generation runs on the node; the fake cloud sees its checks and no
//     create or delete.
func TestClusterctlMoveOnNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	begin := time.Now()
	e, cp, config := startClusterctl(ctx, t)
	defer func() {
		if t.Failed() && !cp.Stopped() {
			e.dumpState(t)
		}
	}()
	// Plane B, started here: what a step starts ends with the step.
	b := clusterctltest.StartPlane(t, "target", e.root, config, clusterctltest.BuildCaptf(ctx, t, e.root))
	r := &moveRun{capiRun: &capiRun{env: e, controlPlane: true}, config: config,
		a: plane{name: "A", kube: e.kube, captf: e.captf, dyn: e.dyn, kubeconfig: cp.KubeconfigPath(controlplane.Admin)},
		b: plane{name: "B", kube: b.Env.Kube, captf: b.Env.Captf, dyn: b.Dyn, kubeconfig: b.Kubeconfig}}
	t.Logf("both management clusters ready in %s", time.Since(begin).Round(time.Millisecond))

	e.runSteps(ctx, t, cp, []step{
		{"ClusterctlInitManagerReady", e.managerReady},
		{"Provision", r.provisionWorkload},
		{"MoveToB", func(ctx context.Context, t *testing.T) { r.move(ctx, t, r.a, r.b) }},
		{"MoveBackToA", func(ctx context.Context, t *testing.T) { r.move(ctx, t, r.b, r.a) }},
		{"SpecChangeAppliesOnce", r.specChange},
		{"NoSecretInManagerLogsOrEvents", e.noCredentialInLogs},
	})
	t.Logf("TestClusterctlMoveOnNode took %s in all", time.Since(begin).Round(time.Millisecond))
}

// plane is one management cluster as the move steps see it.
type plane struct {
	name       string
	kube       kubernetes.Interface
	captf      versioned.Interface
	dyn        dynamic.Interface
	kubeconfig string
}

// moveRun is what the move steps share.
type moveRun struct {
	*capiRun
	config string
	a, b   plane
	// copied is the operator's copy of the source Secret in B.
	copied *corev1.Secret
}

// snapshot is what a move must keep.
type snapshot struct {
	uids    map[string]types.UID
	outputs map[string]string
	states  map[string][]byte
	// owned names, by kind, the Secrets each moved object owns in the
	// source: its state, inputs Secret, state backups and mirror.
	owned     map[string][]string
	endpoint  v1alpha1.APIEndpoint
	provider  string
	resources []fakecloud.Resource
	seq       int
}

var moved = []struct{ kind, name string }{{v1alpha1.KindTerraformCluster, clusterName}, {v1alpha1.KindTerraformMachine, machineName}}

// provisionWorkload provisions the cluster and the machine with real
// Jobs (capiRun.provision) and gives Cluster API the workload cluster:
// plane A's kubeconfig, and a Node with the machine's provider ID. The
// bootstrap data Secret gets the Machine as owner, as a bootstrap
// provider's has through its config, so it moves with it.
func (r *moveRun) provisionWorkload(ctx context.Context, t *testing.T) {
	e := r.env
	r.provision(ctx, t)
	m, err := e.getObject(ctx, capiMachineGVR, machineName)
	if err != nil {
		t.Fatal(err)
	}
	owner := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Machine","name":%q,"uid":%q}]}}`, machineName, m.GetUID())
	if _, err := e.kube.CoreV1().Secrets(tenant).Patch(ctx, bootstrapSecret, types.MergePatchType, []byte(owner), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(r.a.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Secrets(tenant).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: clusterName + "-kubeconfig", Labels: map[string]string{v1alpha1.LabelClusterName: clusterName}},
		Type:       "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": kubeconfig}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No pod may land on it: cordoned and tainted.
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e2e-workload-" + machineName},
		Spec: corev1.NodeSpec{ProviderID: "fakecloud:///" + r.machineID, Unschedulable: true,
			Taints: []corev1.Taint{{Key: "captf.e2e/workload-stand-in", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitMovable(ctx, t, r.a)
}

// waitMovable waits until Cluster API in p sees what clusterctl move
// requires: the Machine's nodeRef, the Cluster's infrastructure
// provisioned and its control plane initialized.
func (r *moveRun) waitMovable(ctx context.Context, t *testing.T, p plane) {
	t.Helper()
	r.waitFor(ctx, t, 3*time.Minute, p.name+": the Machine's nodeRef, the Cluster provisioned and its control plane initialized", func() (bool, string) {
		return clusterctltest.Movable(ctx, p.dyn, tenant, clusterName, machineName)
	})
}

// take records what from holds before a move.
func (r *moveRun) take(ctx context.Context, t *testing.T, from plane) snapshot {
	t.Helper()
	s := snapshot{uids: map[string]types.UID{}, outputs: map[string]string{}, states: map[string][]byte{}, owned: map[string][]string{}}
	for _, o := range moved {
		obj, st, err := clusterctltest.Object(from.captf, tenant, o.kind, o.name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Outputs == nil || !clusterctltest.IsProvisioned(st) {
			t.Fatalf("%s: %s %s before the move: outputs %v, initialization %+v", from.name, o.kind, o.name, st.Outputs, st.Initialization)
		}
		s.uids[o.kind], s.outputs[o.kind] = obj.GetUID(), string(st.Outputs.Raw)
		name := tfstate.SecretName(jobs.StateSuffix(o.kind, o.name))
		sec, err := from.kube.CoreV1().Secrets(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.states[name] = sec.Data[tfstate.DataKey]
		s.owned[o.kind] = ownedSecrets(ctx, t, from, obj.GetUID())
	}
	tc, err := from.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := from.captf.InfrastructureV1alpha1().TerraformMachines(tenant).Get(ctx, machineName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.endpoint, s.provider = tc.Spec.ControlPlaneEndpoint, tm.Spec.ProviderID
	s.resources = r.cloud.resources(ctx, t, manifestToken)
	s.seq = lastSeq(r.cloud.seen(ctx, t))
	if len(s.resources) != 2 {
		t.Fatalf("the fake cloud holds %+v before the move, want the cluster's and the machine's resources", s.resources)
	}
	return s
}
