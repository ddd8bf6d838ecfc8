package capi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// The tests of SPEC section 18 (K2-K8) with Cluster API's core manager
// running: the test creates Cluster API's objects as a user (or a
// ClusterClass) would, Cluster API adopts captf's objects, and the test
// plays the Jobs' pods (no kubelet here): it writes the state Secret a
// module would leave and finishes the Job (framework.FinishJob).

var (
	machineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	poolGVR    = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinepools"}
)

const (
	kindTC  = v1alpha1.KindTerraformCluster
	kindTM  = v1alpha1.KindTerraformMachine
	kindTMP = v1alpha1.KindTerraformMachinePool
)

// env is one test's tenant: a namespace with an identity allowed in it,
// beside the package's control plane, Cluster API manager and captf
// manager.
type env struct {
	*framework.Fixture
	dyn dynamic.Interface
	ns  string
	id  string
}

// setup starts (once per package) Cluster API's core manager, then
// captf's manager as its ServiceAccount: in that order, because captf
// discovers the Cluster API resources once at start (docs/design.md, "The
// Cluster API contract"). It creates the test's namespace and identity.
func setup(t *testing.T) *env {
	t.Helper()
	framework.Get(t).SharedCAPI(t)
	f := framework.NewFixture(t, framework.ManagerOptions{User: controlplane.Manager})
	f.Settle = 2 * time.Minute // a polling deadline: two managers on a shared 2-core machine
	dyn, err := dynamic.NewForConfig(f.Env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{Fixture: f, dyn: dyn}
	e.ns = f.Env.CreateNamespace(t, "capi", nil)
	e.id = f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(e.ns))
	return e
}

// --- captf's objects (never standalone: Cluster API owns them) ---

func (e *env) source() v1alpha1.SourceSpec { return v1alpha1.SourceSpec{Image: "example.com/module:1"} }

func (e *env) idRef() *v1alpha1.IdentityReference { return &v1alpha1.IdentityReference{Name: e.id} }

// terraformCluster creates a TerraformCluster for Cluster API to own.
func (e *env) terraformCluster(name string) *v1alpha1.TerraformCluster {
	e.T.Helper()
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: e.idRef(), Source: e.source()}}
	c, err := e.Env.Captf.InfrastructureV1alpha1().TerraformClusters(e.ns).Create(e.Ctx, c, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return c
}

// terraformMachine creates a TerraformMachine; with owner, it carries the
// controller reference Cluster API's Machine controller would set (for
// the tests where Cluster API does not reconcile: a paused Cluster, a
// Machine that names another object).
func (e *env) terraformMachine(name string, owner *unstructured.Unstructured) *v1alpha1.TerraformMachine {
	e.T.Helper()
	m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.TerraformMachineSpec{IdentityRef: e.idRef(), Source: e.source()}}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{controllerRef(owner)}
	}
	m, err := e.Env.Captf.InfrastructureV1alpha1().TerraformMachines(e.ns).Create(e.Ctx, m, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return m
}

// terraformMachinePool creates a TerraformMachinePool.
func (e *env) terraformMachinePool(name string) *v1alpha1.TerraformMachinePool {
	e.T.Helper()
	p := &v1alpha1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: e.idRef(), Source: e.source()}}
	p, err := e.Env.Captf.InfrastructureV1alpha1().TerraformMachinePools(e.ns).Create(e.Ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return p
}

func controllerRef(owner *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}
}

// object reads one of captf's workload objects: its metadata and status.
func (e *env) object(kind, name string) (metav1.Object, *v1alpha1.WorkloadStatus, error) {
	return clusterctltest.Object(e.Env.Captf, e.ns, kind, name)
}

// status reads an object's status, failing the test on error.
func (e *env) status(kind, name string) *v1alpha1.WorkloadStatus {
	e.T.Helper()
	_, st, err := e.object(kind, name)
	if err != nil {
		e.T.Fatal(err)
	}
	return st
}

func (e *env) conds(kind, name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		_, st, err := e.object(kind, name)
		if err != nil {
			return nil, err
		}
		return st.Conditions, nil
	}
}

// waitCond waits until condition t of kind/name has status and reason.
func (e *env) waitCond(kind, name string, t v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) metav1.Condition {
	e.T.Helper()
	return e.WaitCondition(kind+" "+name, e.conds(kind, name), t, status, reason)
}

// waitStatus waits until ok holds for kind/name's status.
func (e *env) waitStatus(kind, name, what string, ok func(*v1alpha1.WorkloadStatus) (bool, string)) *v1alpha1.WorkloadStatus {
	e.T.Helper()
	return clusterctltest.WaitStatus(e.Fixture, kind+" "+name+": "+what, func() (*v1alpha1.WorkloadStatus, error) {
		_, st, err := e.object(kind, name)
		return st, err
	}, ok)
}

// isProvisioned reports status.initialization.provisioned.
var isProvisioned = clusterctltest.IsProvisioned

// condition returns the status condition of type typ of an unstructured
// object, nil when absent.
var condition = clusterctltest.Condition

// waitProvisioned waits for status.initialization.provisioned.
func (e *env) waitProvisioned(kind, name string) *v1alpha1.WorkloadStatus {
	e.T.Helper()
	return e.waitStatus(kind, name, "provisioned", func(st *v1alpha1.WorkloadStatus) (bool, string) {
		return isProvisioned(st), fmt.Sprintf("initialization %+v", st.Initialization)
	})
}

// requireCond fails unless condition t of st has status and reason now.
func requireCond(t *testing.T, what string, st *v1alpha1.WorkloadStatus, typ v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, string(typ))
	if c == nil || c.Status != status || c.Reason != string(reason) {
		t.Fatalf("%s: want %s=%s/%s; conditions: %s", what, typ, status, reason, framework.Describe(st.Conditions))
	}
}

// --- Cluster API's objects (complete as written: no webhook defaults them) ---

func (e *env) createCAPI(gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	e.T.Helper()
	u, err := e.dyn.Resource(gvr).Namespace(e.ns).Create(e.Ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return u
}

func (e *env) getCAPI(gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	return e.dyn.Resource(gvr).Namespace(e.ns).Get(e.Ctx, name, metav1.GetOptions{})
}

// patchCAPI applies a JSON merge patch to a Cluster API object.
func (e *env) patchCAPI(gvr schema.GroupVersionResource, name string, patch map[string]any) {
	e.T.Helper()
	b, _ := json.Marshal(patch)
	if _, err := e.dyn.Resource(gvr).Namespace(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// capiCluster creates a Cluster whose spec.infrastructureRef names
// group/kind/name.
func (e *env) capiCluster(name, group, kind, infra string, paused bool) *unstructured.Unstructured {
	e.T.Helper()
	spec := map[string]any{
		"infrastructureRef": map[string]any{"apiGroup": group, "kind": kind, "name": infra},
	}
	if paused {
		spec["paused"] = true
	}
	return e.createCAPI(clusterGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec":     spec,
	})
}

// clusterFor creates a Cluster naming the TerraformCluster infra.
func (e *env) clusterFor(name, infra string, paused bool) *unstructured.Unstructured {
	e.T.Helper()
	return e.capiCluster(name, v1alpha1.SchemeGroupVersion.Group, kindTC, infra, paused)
}

// setPaused sets a Cluster's spec.paused (K3).
func (e *env) setPaused(cluster string, paused bool) {
	e.T.Helper()
	e.patchCAPI(clusterGVR, cluster, map[string]any{"spec": map[string]any{"paused": paused}})
}

// machine creates a Machine of cluster whose infrastructureRef names the
// TerraformMachine infra and whose bootstrap data is the Secret
// bootstrap; edit, if not nil, changes its spec first.
func (e *env) machine(name, cluster, infra, bootstrap string, edit func(spec map[string]any)) *unstructured.Unstructured {
	e.T.Helper()
	spec := map[string]any{
		"clusterName":       cluster,
		"bootstrap":         map[string]any{"dataSecretName": bootstrap},
		"infrastructureRef": map[string]any{"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": kindTM, "name": infra},
	}
	if edit != nil {
		edit(spec)
	}
	return e.createCAPI(machineGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec":     spec,
	})
}

// machinePool creates a MachinePool of cluster with replicas whose
// template names the TerraformMachinePool infra and bootstrap data Secret
// bootstrap.
func (e *env) machinePool(name, cluster, infra, bootstrap string, replicas int64) *unstructured.Unstructured {
	e.T.Helper()
	return e.createCAPI(poolGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec": map[string]any{
			"clusterName": cluster,
			"replicas":    replicas,
			"template": map[string]any{"spec": map[string]any{
				"clusterName":       cluster,
				"bootstrap":         map[string]any{"dataSecretName": bootstrap},
				"infrastructureRef": map[string]any{"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": kindTMP, "name": infra},
			}},
		},
	})
}

// bootstrapSecret creates (or updates) a bootstrap data Secret as Cluster
// API's bootstrap providers write it: keys value and format, labelled
// with its cluster's name.
func (e *env) bootstrapSecret(name, cluster, value string) {
	e.T.Helper()
	secrets := e.Env.Kube.CoreV1().Secrets(e.ns)
	data := map[string][]byte{"value": []byte(value), "format": []byte("cloud-config")}
	cur, err := secrets.Get(e.Ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name,
			Labels: map[string]string{v1alpha1.LabelClusterName: cluster}},
			Type: "cluster.x-k8s.io/secret", Data: data}
		_, err = secrets.Create(e.Ctx, s, metav1.CreateOptions{})
	case err == nil:
		cur.Data = data
		_, err = secrets.Update(e.Ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// capiCondition returns condition typ of a Cluster API object (nil when
// absent or the object cannot be read).
func (e *env) capiCondition(gvr schema.GroupVersionResource, name, typ string) map[string]any {
	u, err := e.getCAPI(gvr, name)
	if err != nil {
		return nil
	}
	return condition(u, typ)
}

// --- Jobs: the test plays their pods ---

// jobsOf lists the Jobs of kind/name with action ("" any), oldest first.
func (e *env) jobsOf(kind, name string, action v1alpha1.JobAction) []batchv1.Job {
	e.T.Helper()
	l, err := e.Env.Kube.BatchV1().Jobs(e.ns).List(e.Ctx, metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range l.Items {
		owner := metav1.GetControllerOfNoCopy(&j)
		if owner == nil || owner.Kind != kind || owner.Name != name {
			continue
		}
		if action == "" || jobs.ActionOf(&j) == action {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b batchv1.Job) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// requireNoJobs fails if kind/name has any Job of action ("" any).
func (e *env) requireNoJobs(kind, name string, action v1alpha1.JobAction, why string) {
	e.T.Helper()
	if js := e.jobsOf(kind, name, action); len(js) > 0 {
		e.T.Fatalf("%s: %s %s has %d Jobs (first %s), want none", why, kind, name, len(js), js[0].Name)
	}
}

// waitJob waits for a Job of kind/name and action for which ok holds
// (nil: any) and returns it.
func (e *env) waitJob(kind, name string, action v1alpha1.JobAction, what string, ok func(*batchv1.Job) bool) batchv1.Job {
	e.T.Helper()
	var found batchv1.Job
	e.WaitFor(fmt.Sprintf("%s Job of %s %s (%s)", action, kind, name, what), func() (bool, string) {
		js := e.jobsOf(kind, name, action)
		var names []string
		for i := range js {
			names = append(names, js[i].Name)
			if ok == nil || ok(&js[i]) {
				found = js[i]
				return true, ""
			}
		}
		_, st, _ := e.object(kind, name)
		desc := ""
		if st != nil {
			desc = framework.Describe(st.Conditions)
		}
		return false, fmt.Sprintf("Jobs %v; %s", names, desc)
	})
	return found
}

// notIn selects the Jobs not named in names: a new one.
func notIn(names ...string) func(*batchv1.Job) bool {
	return func(j *batchv1.Job) bool { return !slices.Contains(names, j.Name) }
}

// describeRun formats a run record for messages.
func describeRun(r *v1alpha1.RunRecord) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("{job %s, generation %d, attempt %d, %s, inputsHash %.12s}", r.JobName, r.Generation, r.Attempt, r.Outcome, r.InputsHash)
}

// ofGeneration selects the Jobs of generation g.
func ofGeneration(g int64) func(*batchv1.Job) bool {
	return func(j *batchv1.Job) bool { n, ok := jobs.GenerationOf(j); return ok && n == g }
}

// writeState writes the state Secret of kind/name as the module's apply
// would leave it, with outputs (name to JSON value).
func (e *env) writeState(kind, name string, outputs map[string]string) {
	e.T.Helper()
	suffix := jobs.StateSuffix(kind, name)
	want := tfstatetest.Secret(e.ns, tfstate.SecretName(suffix), suffix, tfstatetest.Gzip(tfstatetest.State("", outputs)))
	secrets := e.Env.Kube.CoreV1().Secrets(e.ns)
	cur, err := secrets.Get(e.Ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(e.Ctx, want, metav1.CreateOptions{})
	case err == nil:
		cur.Data = want.Data
		_, err = secrets.Update(e.Ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// succeed plays a successful run of j: the state with outputs (nil: left
// as it is), then the Job's success.
func (e *env) succeed(kind, name string, j batchv1.Job, outputs map[string]string) {
	e.T.Helper()
	if outputs != nil {
		e.writeState(kind, name, outputs)
	}
	if err := e.Env.FinishJob(e.Ctx, e.ns, j.Name, ""); err != nil {
		e.T.Fatal(err)
	}
}

// fail plays a failed run of j.
func (e *env) fail(j batchv1.Job) {
	e.T.Helper()
	if err := e.Env.FinishJob(e.Ctx, e.ns, j.Name, "BackoffLimitExceeded"); err != nil {
		e.T.Fatal(err)
	}
}

// runInputs waits for the run Secret of Job j (K5: created right after
// the suspended Job, before it is resumed) and returns its inputs.
func (e *env) runInputs(j batchv1.Job) map[string]json.RawMessage {
	e.T.Helper()
	var in map[string]json.RawMessage
	e.WaitFor("run Secret of Job "+j.Name, func() (bool, string) {
		s, err := e.Env.Kube.CoreV1().Secrets(e.ns).Get(e.Ctx, jobs.RunSecretName(j.Name), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		owner := metav1.GetControllerOfNoCopy(s)
		if owner == nil || owner.Kind != "Job" || owner.UID != j.UID {
			return false, fmt.Sprintf("run Secret not owned by the Job: %+v", s.OwnerReferences)
		}
		if err := json.Unmarshal(s.Data[jobs.InputsKey], &in); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return in
}

// inputString decodes a string input.
func inputString(t *testing.T, in map[string]json.RawMessage, name string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(in[name], &s); err != nil {
		t.Fatalf("input %s = %s: %v", name, in[name], err)
	}
	return s
}

// --- composite steps ---

// provisionedCluster creates a Cluster and its TerraformCluster and plays
// the first apply with an endpoint and extra outputs; it returns once the
// TerraformCluster is provisioned.
func (e *env) provisionedCluster(name string, outputs map[string]string) {
	e.T.Helper()
	e.terraformCluster(name)
	e.clusterFor(name, name, false)
	j := e.waitJob(kindTC, name, v1alpha1.JobActionApply, "first", nil)
	all := map[string]string{"control_plane_endpoint": fmt.Sprintf(`{"host":"cp.%s.example","port":6443}`, name)}
	for k, v := range outputs {
		all[k] = v
	}
	e.succeed(kindTC, name, j, all)
	e.waitProvisioned(kindTC, name)
	e.settleEndpointEcho(name, j.Name)
}

// settleEndpointEcho waits for Cluster API to copy the endpoint output
// into the Cluster's spec.controlPlaneEndpoint. That copy is the cluster's
// own output, not an input (K6: pkg/contract leaves a Cluster's endpoint
// equal to the TerraformCluster's own out), so it makes no second apply
// due: the tests that count the cluster's Jobs would see one.
func (e *env) settleEndpointEcho(name, first string) {
	e.T.Helper()
	e.WaitFor("Cluster API copies the endpoint to the Cluster", func() (bool, string) {
		c, err := e.getCAPI(clusterGVR, name)
		if err != nil {
			return false, err.Error()
		}
		host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
		return host != "", "Cluster spec.controlPlaneEndpoint unset"
	})
}

// provisionedMachine creates a Machine of cluster with a bootstrap data
// Secret and its TerraformMachine, and plays its first apply with the
// provider ID fake://<name>; it returns once the TerraformMachine is
// provisioned.
func (e *env) provisionedMachine(name, cluster string) {
	e.T.Helper()
	e.bootstrapSecret(name+"-bootstrap", cluster, "#cloud-config for "+name)
	e.terraformMachine(name, nil)
	e.machine(name, cluster, name, name+"-bootstrap", nil)
	j := e.waitJob(kindTM, name, v1alpha1.JobActionApply, "first", nil)
	e.succeed(kindTM, name, j, map[string]string{"provider_id": `"fake://` + name + `"`})
	e.waitProvisioned(kindTM, name)
}

// waitGone waits until kind/name no longer exists.
func (e *env) waitGone(kind, name string) {
	e.T.Helper()
	e.WaitFor(kind+" "+name+" deleted", func() (bool, string) {
		o, st, err := e.object(kind, name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("finalizers %v; %s", o.GetFinalizers(), framework.Describe(st.Conditions))
	})
}

// deleteObject deletes one of captf's objects.
func (e *env) deleteObject(kind, name string) {
	e.T.Helper()
	api := e.Env.Captf.InfrastructureV1alpha1()
	var err error
	switch kind {
	case kindTC:
		err = api.TerraformClusters(e.ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
	case kindTM:
		err = api.TerraformMachines(e.ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
	case kindTMP:
		err = api.TerraformMachinePools(e.ns).Delete(e.Ctx, name, metav1.DeleteOptions{})
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// setVariables sets spec.variables of kind/name: a new generation, which
// it returns.
func (e *env) setVariables(kind, name string, vars string) int64 {
	e.T.Helper()
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"variables": json.RawMessage(vars)}})
	api := e.Env.Captf.InfrastructureV1alpha1()
	var o metav1.Object
	var err error
	switch kind {
	case kindTC:
		o, err = api.TerraformClusters(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	case kindTM:
		o, err = api.TerraformMachines(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	case kindTMP:
		o, err = api.TerraformMachinePools(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	}
	if err != nil {
		e.T.Fatal(err)
	}
	return o.GetGeneration()
}

// annotate sets annotation key=value on kind/name (no new generation).
func (e *env) annotate(kind, name, key, value string) {
	e.T.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	api := e.Env.Captf.InfrastructureV1alpha1()
	var err error
	switch kind {
	case kindTC:
		_, err = api.TerraformClusters(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	case kindTM:
		_, err = api.TerraformMachines(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	case kindTMP:
		_, err = api.TerraformMachinePools(e.ns).Patch(e.Ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// never polls bad for window and fails the test the first time it
// reports a problem: a check that something does not happen, bounded by
// the window (it proves nothing about what happens after).
func (e *env) never(window time.Duration, bad func() (bool, string)) {
	e.T.Helper()
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		if b, msg := bad(); b {
			e.T.Fatal(msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// watcher polls check in the background until stopped and keeps the
// problems it reports (K8: conditions that must hold throughout).
type watcher struct {
	mu       sync.Mutex
	polls    int
	problems []string
	cancel   context.CancelFunc
	done     chan struct{}
}

func watch(ctx context.Context, check func() []string) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			p := check()
			w.mu.Lock()
			w.polls++
			w.problems = append(w.problems, p...)
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// waitPolls waits until n more polls have run than when it was called.
func (w *watcher) waitPolls(e *env, n int) {
	e.T.Helper()
	w.mu.Lock()
	target := w.polls + n
	w.mu.Unlock()
	e.WaitFor(fmt.Sprintf("%d more polls", n), func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.polls >= target, fmt.Sprintf("%d polls of %d", w.polls, target)
	})
}

// stop ends the polling and returns how many polls ran and the problems.
func (w *watcher) stop() (int, []string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.problems
}

// scanFor fails the test when any of the forbidden strings appears in
// the JSON of objs (X1, K5).
func scanFor(t *testing.T, what string, objs []any, forbidden ...string) {
	t.Helper()
	for i, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range forbidden {
			if strings.Contains(string(b), s) {
				t.Errorf("K5/X1: %s #%d contains bootstrap data", what, i)
			}
		}
	}
}

// b64 is the standard base64 of s (bootstrap_data's encoding).
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// rawJSON compacts a JSON document for comparison.
func rawJSON(t *testing.T, v any) string {
	t.Helper()
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case *runtime.RawExtension:
		if x == nil {
			return ""
		}
		b = x.Raw
	case string:
		b = []byte(x)
	default:
		t.Fatalf("rawJSON: %T", v)
	}
	var o any
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	out, _ := json.Marshal(o)
	return string(out)
}
