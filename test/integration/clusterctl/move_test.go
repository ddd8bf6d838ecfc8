package clusterctl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
	infrav1alpha1 "github.com/captf/captf/pkg/generated/clientset/versioned/typed/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

var (
	clusterGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	machineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
)

// TestClusterctlMove is K11 and K12's move with the real clients: two
// management clusters (two local control planes), each with Cluster API
// and captf installed by `clusterctl init --infrastructure terraform` from
// the local repository (so the CRDs carry clusterctl's labels, which move
// discovers its types by, and the inventory lists the providers, which
// move compares), and each running Cluster API's core manager and captf's
// manager (as its ServiceAccount, with the installed RBAC, webhook and
// admission policy: B3 in force). No Deployment's pod runs (no kubelet):
// the webhook configurations that point at their Services are removed,
// captf's replaced by one pointing at the local manager; the test plays
// the Jobs' pods (framework.FinishJob) and the workload cluster (the
// source control plane itself, with a Node whose provider ID is the
// machine's), so Cluster API sees the Machine's nodeRef and the control
// plane initialized, which clusterctl move requires.
//
// In the source, a Cluster with a TerraformCluster and a control-plane
// Machine with a TerraformMachine are provisioned; the operator copies the
// identity's source Secret to the target (docs/operator-guide.md, "Moving a
// cluster"). B3 in the target, for what the move will copy: the mirror is
// refused to a cluster-admin outside system:masters (the runbook's reason
// to move as system:masters) and accepted from the admin. Then a spec
// change of the cluster starts an apply Job, and `clusterctl move`, as an
// operator types it, is started while it runs: clusterctl pauses the
// Cluster and waits for block-move, copying nothing, until the Job ends.
// Every Job created in either namespace is recorded (a watch: a destroy
// Job in the source would be garbage collected with its object). After the
// move: no Job was created by it in either plane; the target's
// TerraformCluster and TerraformMachine adopted their last applied state
// (StateAdopted, lastApply adopted, Ready, the same endpoint and provider
// ID) and Cluster API in the target sees the infrastructure provisioned;
// the state Secrets are in the target, owned by the copies, and gone from
// the source; the mirror is in the target, owned by the copies and current;
// the identity is in the target and its source Secret only where the
// operator copied it; a spec change in the target then creates exactly one
// apply Job.
func TestClusterctlMove(t *testing.T) {
	start := time.Now()
	ctx := framework.Context(t)
	bin := clusterctltest.BuildCaptf(ctx, t, framework.Get(t).Root)
	repository(t) // written before the planes start, timed on its own

	src := startPlane(t, "source", bin)
	dst := startPlane(t, "target", bin)
	t.Logf("two management clusters ready in %s", time.Since(start).Round(time.Millisecond))

	// --- the source: a provisioned cluster and machine ---
	ns := src.Env.CreateNamespace(t, "move", nil)
	const secretValue = "move-secret-value"
	ref := src.F.Source(framework.DefaultData(secretValue))
	id := src.F.Identity(ref, framework.List(ns))
	idRef := &v1alpha1.IdentityReference{Name: id}
	source := v1alpha1.SourceSpec{Image: "example.com/module:1"}

	api := src.Env.Captf.InfrastructureV1alpha1()
	if _, err := api.TerraformClusters(ns).Create(ctx, &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: idRef, Source: source}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src.Create(t, clusterGVR, ns, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": "demo", "namespace": ns},
		"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": v1alpha1.KindTerraformCluster, "name": "demo"}},
	})
	cj := src.waitJob(t, ns, v1alpha1.KindTerraformCluster, "demo", v1alpha1.JobActionApply)
	src.succeed(t, ns, v1alpha1.KindTerraformCluster, "demo", cj, map[string]string{"control_plane_endpoint": `{"host":"cp.demo.example","port":6443}`})
	src.WaitProvisioned(t, ns, v1alpha1.KindTerraformCluster, "demo")

	// The workload cluster's kubeconfig (the source control plane itself):
	// Cluster API reads the machine's Node from it.
	kubeconfig, err := os.ReadFile(src.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	src.Secret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-kubeconfig",
		Labels: map[string]string{v1alpha1.LabelClusterName: "demo"}},
		Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": kubeconfig}})

	if _, err := api.TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1"},
		Spec: v1alpha1.TerraformMachineSpec{IdentityRef: idRef, Source: source}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	machine := src.Create(t, machineGVR, ns, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"name": "m1", "namespace": ns, "labels": map[string]any{
			"cluster.x-k8s.io/control-plane": "", v1alpha1.LabelClusterName: "demo"}},
		"spec": map[string]any{
			"clusterName":       "demo",
			"bootstrap":         map[string]any{"dataSecretName": "m1-bootstrap"},
			"infrastructureRef": map[string]any{"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": v1alpha1.KindTerraformMachine, "name": "m1"},
		},
	})
	// The bootstrap data, owned (as a bootstrap provider's is, through its
	// config) by what moves: here the Machine.
	src.Secret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m1-bootstrap",
		Labels:          map[string]string{v1alpha1.LabelClusterName: "demo"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m1", UID: machine.GetUID()}}},
		Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": []byte("#cloud-config for m1"), "format": []byte("cloud-config")}})
	mj := src.waitJob(t, ns, v1alpha1.KindTerraformMachine, "m1", v1alpha1.JobActionApply)
	src.succeed(t, ns, v1alpha1.KindTerraformMachine, "m1", mj, map[string]string{"provider_id": `"fake://m1"`})
	src.WaitProvisioned(t, ns, v1alpha1.KindTerraformMachine, "m1")

	// The machine's Node in the workload cluster, found by its provider ID.
	if _, err := src.Env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1-" + ns},
		Spec: corev1.NodeSpec{ProviderID: "fake://m1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = src.Env.Kube.CoreV1().Nodes().Delete(context.Background(), "m1-"+ns, metav1.DeleteOptions{})
	})
	src.F.WaitFor("Cluster API: the Machine's nodeRef, the Cluster's infrastructure provisioned and control plane initialized", func() (bool, string) {
		return clusterctltest.Movable(ctx, src.Dyn, ns, "demo", "m1")
	})

	before := map[string]*v1alpha1.WorkloadStatus{}
	for _, o := range []struct{ kind, name string }{{v1alpha1.KindTerraformCluster, "demo"}, {v1alpha1.KindTerraformMachine, "m1"}} {
		before[o.kind] = src.Status(t, ns, o.kind, o.name)
	}
	srcMachine, err := api.TerraformMachines(ns).Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if srcMachine.Spec.ProviderID != "fake://m1" {
		t.Fatalf("before the move: provider ID %q, want fake://m1", srcMachine.Spec.ProviderID)
	}

	// --- the operator copies the identity's source Secret to the target ---
	copied := clusterctltest.CopySource(ctx, t, src.Env.Kube, dst.Env.Kube, ref)

	// B3 in the target, for what the move will copy: a mover that is not
	// system:masters (here a cluster-admin) may not create the Secrets
	// that carry the manager's trusted marks (a server-side dry run goes
	// through admission and stores nothing); the admin may.
	guarded := b3Guarded(t, src, dst, ns, secretValue)
	if !slices.Contains(guarded, credentials.MirrorName(id)) {
		t.Errorf("B3: the mirror %s was not refused to a mover outside system:masters; refused: %v", credentials.MirrorName(id), guarded)
	}
	t.Logf("B3: Secrets of the move a cluster-admin outside system:masters may not create in the target: %v", guarded)

	// Every Job created from here on, in either plane's namespace.
	srcJobs := clusterctltest.RecordJobs(ctx, t, src.Env.Kube, ns)
	dstJobs := clusterctltest.RecordJobs(ctx, t, dst.Env.Kube, ns)

	// A run in progress when the move starts: a spec change of the
	// cluster, whose apply Job marks it block-move.
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"variables": map[string]any{"size": "medium"}}})
	gen2, err := api.TerraformClusters(ns).Patch(ctx, "demo", types.MergePatchType, b, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var running batchv1.Job
	src.F.WaitFor("the apply Job of the cluster's change, the cluster marked block-move", func() (bool, string) {
		j, ok := src.jobOf(ns, v1alpha1.KindTerraformCluster, "demo", v1alpha1.JobActionApply, gen2.Generation)
		c, err := api.TerraformClusters(ns).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, blocked := c.Annotations[v1alpha1.AnnotationBlockMove]
		running = j
		return ok && blocked, fmt.Sprintf("Job of generation %d: %v; annotations %v", gen2.Generation, ok, c.Annotations)
	})

	// --- clusterctl move, started while the Job runs ---
	type result struct {
		stdout, stderr []byte
		err            error
	}
	done, finished := make(chan result, 1), make(chan struct{})
	moveCtx, cancelMove := context.WithCancel(ctx)
	// On a failure meanwhile, clusterctl is stopped and waited for: it
	// logs to t, which must not outlive the test.
	t.Cleanup(func() { cancelMove(); <-finished })
	moveStart := time.Now()
	go func() {
		defer close(finished)
		o, e, err := runClusterctl(moveCtx, t, nil, "move", "--kubeconfig", src.Kubeconfig, "--to-kubeconfig", dst.Kubeconfig, "-n", ns, "-v", "3")
		done <- result{o, e, err}
	}()
	// clusterctl pauses the Cluster, then waits for block-move to go: the
	// copies are not created meanwhile.
	src.F.WaitFor("clusterctl pauses the source Cluster", func() (bool, string) {
		c, err := src.Get(clusterGVR, ns, "demo")
		if err != nil {
			return false, err.Error()
		}
		paused, _, _ := unstructured.NestedBool(c.Object, "spec", "paused")
		return paused, "spec.paused unset"
	})
	for _, check := range []time.Duration{2 * time.Second, 3 * time.Second} {
		time.Sleep(check)
		select {
		case r := <-done:
			t.Fatalf("K11: clusterctl move ended while an apply Job ran (block-move): %v\n%s%s", r.err, r.stdout, r.stderr)
		default:
		}
		if _, err := dapi(dst).TerraformClusters(ns).Get(ctx, "demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("K11: the TerraformCluster was copied while its apply Job ran (%v)", err)
		}
	}
	// The Job's pod ends: its state, with the same endpoint.
	src.succeed(t, ns, v1alpha1.KindTerraformCluster, "demo", running, map[string]string{"control_plane_endpoint": `{"host":"cp.demo.example","port":6443}`})
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("clusterctl move did not end within 5 minutes of the Job's end")
	}
	t.Logf("clusterctl move (%s):\n%s%s", time.Since(moveStart).Round(time.Millisecond), r.stdout, r.stderr)
	if r.err != nil {
		t.Fatalf("clusterctl move: %v", r.err)
	}
	if !strings.Contains(string(r.stderr)+string(r.stdout), "Move blocked by "+v1alpha1.AnnotationBlockMove) {
		t.Errorf("K11: clusterctl's output does not say the move waited for %s", v1alpha1.AnnotationBlockMove)
	}
	srcCluster := gen2

	// --- after ---
	api2 := dapi(dst)
	for _, o := range []struct{ kind, name string }{{v1alpha1.KindTerraformCluster, "demo"}, {v1alpha1.KindTerraformMachine, "m1"}} {
		st := dst.WaitStatus(t, ns, o.kind, o.name, "adopted the state, Ready", func(st *v1alpha1.WorkloadStatus) (bool, string) {
			if js := dstJobs.Names(); len(js) != 0 {
				t.Fatalf("K11: Jobs in the target before any change there (applied twice): %v", js)
			}
			ready := meta.FindStatusCondition(st.Conditions, string(v1alpha1.ConditionReady))
			return st.LastApply != nil && st.LastApply.JobName == "(adopted from the state)" && clusterctltest.IsProvisioned(st) &&
					ready != nil && ready.Status == metav1.ConditionTrue,
				fmt.Sprintf("lastApply %+v, initialization %+v", st.LastApply, st.Initialization)
		})
		if want := before[o.kind].Outputs; want == nil || st.Outputs == nil || string(st.Outputs.Raw) != string(want.Raw) {
			t.Errorf("K11: %s %s in the target: outputs %v, want the source's %v", o.kind, o.name, st.Outputs, want)
		}
		dst.F.WaitFor("the StateAdopted event of "+o.kind+" "+o.name, func() (bool, string) {
			evs, err := dst.Env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			var reasons []string
			for _, e := range evs.Items {
				if e.InvolvedObject.Kind == o.kind && e.InvolvedObject.Name == o.name {
					reasons = append(reasons, e.Reason)
				}
			}
			return slices.Contains(reasons, v1alpha1.EventStateAdopted), fmt.Sprintf("events %v", reasons)
		})
	}
	dstCluster, err := api2.TerraformClusters(ns).Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dstMachine, err := api2.TerraformMachines(ns).Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dstCluster.UID == srcCluster.UID || dstMachine.UID == srcMachine.UID {
		t.Fatalf("the target's objects have the source's UIDs: not copies")
	}
	if dstCluster.Spec.ControlPlaneEndpoint.Host != "cp.demo.example" || dstCluster.Spec.ControlPlaneEndpoint != srcCluster.Spec.ControlPlaneEndpoint || dstMachine.Spec.ProviderID != srcMachine.Spec.ProviderID {
		t.Errorf("K11: target endpoint %+v, provider ID %q; source had %+v, %q",
			dstCluster.Spec.ControlPlaneEndpoint, dstMachine.Spec.ProviderID, srcCluster.Spec.ControlPlaneEndpoint, srcMachine.Spec.ProviderID)
	}
	dst.F.WaitFor("Cluster API in the target: the Cluster's infrastructure provisioned, the Machine's infrastructure ready", func() (bool, string) {
		c, err := dst.Get(clusterGVR, ns, "demo")
		if err != nil {
			return false, err.Error()
		}
		infra, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
		m, err := dst.Get(machineGVR, ns, "m1")
		if err != nil {
			return false, err.Error()
		}
		mi, _, _ := unstructured.NestedBool(m.Object, "status", "initialization", "infrastructureProvisioned")
		host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		return infra && mi && host == "cp.demo.example" && pid == "fake://m1",
			fmt.Sprintf("Cluster infrastructureProvisioned %v endpoint %q; Machine infrastructureProvisioned %v providerID %q", infra, host, mi, pid)
	})

	// The state: in the target, the same data, owned by the copies; gone
	// from the source (and the objects with it).
	owner := map[string]types.UID{v1alpha1.KindTerraformCluster: dstCluster.UID, v1alpha1.KindTerraformMachine: dstMachine.UID}
	for kind, data := range src.states {
		name := tfstate.SecretName(jobs.StateSuffix(kind, map[string]string{v1alpha1.KindTerraformCluster: "demo", v1alpha1.KindTerraformMachine: "m1"}[kind]))
		dst.F.WaitFor("the state "+name+" in the target, owned by the copy", func() (bool, string) {
			got, err := dst.Env.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if string(got.Data[tfstate.DataKey]) != string(data) {
				return false, "the state's data is not the last apply's"
			}
			return slices.ContainsFunc(got.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == owner[kind] }),
				fmt.Sprintf("owners %v", got.OwnerReferences)
		})
		if _, err := src.Env.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("K11: the state %s is still in the source (%v)", name, err)
		}
	}
	// The mirror, copied by clusterctl (system:masters, through B3),
	// owned by the copies and current for the target's manager.
	dst.F.WaitMirror(ns, id, "owned by both copies", func(m *corev1.Secret) bool {
		return slices.ContainsFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == dstCluster.UID }) &&
			slices.ContainsFunc(m.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == dstMachine.UID })
	})
	dst.F.WaitCondition("target TerraformCluster demo", dst.F.ClusterConds(ns, "demo"), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	for _, o := range []struct{ kind, name string }{{v1alpha1.KindTerraformCluster, "demo"}, {v1alpha1.KindTerraformMachine, "m1"}} {
		if _, _, err := src.Object(ns, o.kind, o.name); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s still in the source after the move (%v)", o.kind, o.name, err)
		}
	}

	// The identity moved (global: it stays in the source too); its source
	// Secret did not: in the target only the operator's copy, untouched
	// by the move; in the source, still there.
	if _, err := api2.TerraformClusterIdentities().Get(ctx, id, metav1.GetOptions{}); err != nil {
		t.Errorf("K11: the identity in the target: %v", err)
	}
	got, err := dst.Env.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the operator's copy of the source Secret: %v", err)
	}
	if got.ResourceVersion != copied.ResourceVersion {
		t.Errorf("K11: the move wrote the identity's source Secret in the target (resourceVersion %s, copied as %s)", got.ResourceVersion, copied.ResourceVersion)
	}
	if _, err := src.Env.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("K11: the identity's source Secret in the source: %v", err)
	}
	named, err := dst.Env.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ref.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range named.Items {
		if s.Namespace != ref.Namespace {
			t.Errorf("K11: a Secret %s/%s in the target: the move copied the identity's source Secret", s.Namespace, s.Name)
		}
	}

	// No Job at all from the move: no destroy in the source, no apply in
	// the target.
	if js := srcJobs.Names(); len(js) != 1 || js[0] != "apply "+running.Name {
		t.Errorf("K11: Jobs created in the source: %v, want only the apply %s started before the move", js, running.Name)
	}
	if js := dstJobs.Names(); len(js) != 0 {
		t.Errorf("K11: the move created Jobs in the target: %v", js)
	}
	// Whether the source's manager saw the deletions for move before
	// clusterctl removed the finalizers is a race: reported, not asserted.
	if evs, err := src.Env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		var moved []string
		for _, e := range evs.Items {
			if e.Reason == v1alpha1.EventMovedAway {
				moved = append(moved, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name)
			}
		}
		t.Logf("MovedAway events in the source: %v", moved)
	}
	t.Logf("K11: the move and the target's adoption took %s; no Job created by the move in either plane", time.Since(moveStart).Round(time.Millisecond))

	// A spec change in the target applies, once.
	b, _ = json.Marshal(map[string]any{"spec": map[string]any{"variables": map[string]any{"size": "large"}}})
	changed, err := api2.TerraformClusters(ns).Patch(ctx, "demo", types.MergePatchType, b, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst.F.WaitFor("one apply Job of the target's change", func() (bool, string) {
		js := dstJobs.Names()
		return len(js) == 1 && strings.HasPrefix(js[0], "apply "), fmt.Sprintf("Jobs %v", js)
	})
	j := dst.waitJob(t, ns, v1alpha1.KindTerraformCluster, "demo", v1alpha1.JobActionApply)
	if g, ok := jobs.GenerationOf(&j); !ok || g != changed.Generation {
		t.Errorf("the target's apply Job is of generation %d, want %d", g, changed.Generation)
	}
	// And only one, while its run goes on: give the manager passes to
	// start a second one.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if js := dstJobs.Names(); len(js) != 1 {
			t.Fatalf("the target's change: Jobs %v, want exactly one apply", js)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if js := srcJobs.Names(); len(js) != 1 {
		t.Errorf("K11: Jobs created in the source: %v", js)
	}
	t.Logf("TestClusterctlMove took %s in all", time.Since(start).Round(time.Millisecond))
}

// plane is one management cluster of the move test, with the state the
// test last wrote there.
type plane struct {
	*clusterctltest.Plane
	// states is the data of the last state the test wrote, by kind.
	states map[string][]byte
}

// startPlane starts a management cluster (clusterctltest.StartPlane) with
// the package's repository.
func startPlane(t *testing.T, name, bin string) *plane {
	t.Helper()
	e := framework.Get(t)
	return &plane{Plane: clusterctltest.StartPlane(t, name, e.Root, filepath.Join(repository(t), "clusterctl.yaml"), bin), states: map[string][]byte{}}
}

// waitJob waits for a Job of kind/name with action and returns the newest.
func (p *plane) waitJob(t *testing.T, ns, kind, name string, action v1alpha1.JobAction) batchv1.Job {
	t.Helper()
	var found batchv1.Job
	p.F.WaitFor(fmt.Sprintf("%s: %s Job of %s %s", p.Name, action, kind, name), func() (bool, string) {
		l, err := p.Env.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, j := range l.Items {
			owner := metav1.GetControllerOfNoCopy(&j)
			if owner != nil && owner.Kind == kind && owner.Name == name && jobs.ActionOf(&j) == action {
				found = j
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Jobs in %s", len(l.Items), ns)
	})
	return found
}

// jobOf finds the Job of kind/name with action and generation.
func (p *plane) jobOf(ns, kind, name string, action v1alpha1.JobAction, generation int64) (batchv1.Job, bool) {
	l, err := p.Env.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return batchv1.Job{}, false
	}
	for _, j := range l.Items {
		owner := metav1.GetControllerOfNoCopy(&j)
		if g, ok := jobs.GenerationOf(&j); ok && g == generation && owner != nil && owner.Kind == kind && owner.Name == name && jobs.ActionOf(&j) == action {
			return j, true
		}
	}
	return batchv1.Job{}, false
}

func dapi(p *plane) infrav1alpha1.InfrastructureV1alpha1Interface {
	return p.Env.Captf.InfrastructureV1alpha1()
}

// succeed plays a successful apply of j: the state the module leaves,
// with outputs, then the Job's success.
func (p *plane) succeed(t *testing.T, ns, kind, name string, j batchv1.Job, outputs map[string]string) {
	t.Helper()
	ctx := framework.Context(t)
	suffix := jobs.StateSuffix(kind, name)
	want := tfstatetest.Secret(ns, tfstate.SecretName(suffix), suffix, tfstatetest.Gzip(tfstatetest.State("", outputs)))
	secrets := p.Env.Kube.CoreV1().Secrets(ns)
	cur, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		cur.Data = want.Data
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	p.states[kind] = want.Data[tfstate.DataKey]
	if err := p.Env.FinishJob(framework.Context(t), ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
}

// b3Guarded creates namespace ns in dst and dry-runs there, as a
// cluster-admin outside system:masters (alice) and as the admin, the
// creation of every Secret of ns in src that carries one of the marks the
// trust-boundary policy guards, as clusterctl move would create it. It
// returns the names refused to alice, each refused by the policy with no
// Secret value in the message; it fails the test if the admin is refused.
func b3Guarded(t *testing.T, src, dst *plane, ns, secretValue string) []string {
	t.Helper()
	ctx := framework.Context(t)
	if _, err := dst.Env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-cluster-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: controlplane.Alice}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice, err := kubernetes.NewForConfig(dst.Env.CP.RestConfig(controlplane.Alice))
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.Env.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, s := range l.Items {
		_, mirrored := s.Labels[v1alpha1.LabelMirrored]
		_, managed := s.Labels[v1alpha1.LabelManaged]
		_, identity := s.Annotations[v1alpha1.AnnotationIdentity]
		_, hash := s.Annotations[v1alpha1.AnnotationSourceHash]
		if !mirrored && !managed && !identity && !hash {
			continue
		}
		c := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations},
			Type: s.Type, Data: s.Data}
		dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		if _, err := dst.Env.Kube.CoreV1().Secrets(ns).Create(ctx, c, dry); err != nil {
			t.Fatalf("B3: the admin (system:masters) may not create %s in the target: %v", s.Name, err)
		}
		_, err := alice.CoreV1().Secrets(ns).Create(ctx, c, dry)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "captf-trust-boundary") {
			t.Fatalf("B3: creating %s as a cluster-admin: %v, want the trust-boundary policy's refusal", s.Name, err)
		}
		if strings.Contains(err.Error(), secretValue) {
			t.Errorf("X1: the refusal of %s carries the Secret's value", s.Name)
		}
		refused = append(refused, s.Name)
	}
	return refused
}
