package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/statebackup"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/test/clusterctltest"
)

// move runs `clusterctl move` from -> to as an operator types it, as the
// admin (system:masters, B3), and checks K11: see TestClusterctlMoveOnNode.
func (r *moveRun) move(ctx context.Context, t *testing.T, from, to plane) {
	if r.copied == nil {
		// The runbook's step: the identity's source Secret, copied by the
		// operator (docs/operator-guide.md, "Moving a cluster").
		r.copied = clusterctltest.CopySource(ctx, t, from.kube, to.kube, v1alpha1.SecretReference{Namespace: cloudNamespace, Name: cloudSecret})
	}
	sourceRV := map[string]string{}
	for _, p := range []plane{from, to} {
		s, err := p.kube.CoreV1().Secrets(cloudNamespace).Get(ctx, cloudSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the identity's source Secret before the move: %v", p.name, err)
		}
		sourceRV[p.name] = s.ResourceVersion
	}
	r.waitMovable(ctx, t, from)
	before := r.take(ctx, t, from)
	fromJobs := clusterctltest.RecordJobs(ctx, t, from.kube, tenant)
	toJobs := clusterctltest.RecordJobs(ctx, t, to.kube, tenant)
	noJobs := func() {
		t.Helper()
		if js := append(fromJobs.Names(), toJobs.Names()...); len(js) != 0 {
			t.Fatalf("K11: Jobs created by the move (source %v, target %v)", fromJobs.Names(), toJobs.Names())
		}
	}

	start := time.Now()
	stdout, stderr, err := clusterctltest.Run(ctx, t, r.root, r.config, nil, "move", "--kubeconfig", from.kubeconfig, "--to-kubeconfig", to.kubeconfig, "-n", tenant, "-v", "3")
	t.Logf("clusterctl move %s -> %s (%s):\n%s%s", from.name, to.name, time.Since(start).Round(time.Millisecond), stdout, stderr)
	if err != nil {
		t.Fatalf("clusterctl move: %v", err)
	}
	uids := r.checkAdopted(ctx, t, to, before, noJobs)
	r.waitCAPIProvisioned(ctx, t, to, before)
	r.checkStateMoved(ctx, t, from, to, before, uids)
	r.checkIdentity(ctx, t, from, to, sourceRV)

	// Nothing ran: no Job in either plane, a while longer, and the fake
	// cloud holds what it held and heard from no Job.
	quiet := time.Now().Add(10 * time.Second)
	for time.Now().Before(quiet) {
		noJobs()
		time.Sleep(time.Second)
	}
	r.checkCloudUnchanged(ctx, t, before)
	// Whether the source's manager saw the deletions for move before
	// clusterctl removed the finalizers (it deletes, then removes them) is
	// a race: reported, not asserted.
	if evs, err := from.kube.CoreV1().Events(tenant).List(ctx, metav1.ListOptions{}); err == nil {
		var away []string
		for _, ev := range evs.Items {
			if ev.Reason == v1alpha1.EventMovedAway {
				away = append(away, ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name)
			}
		}
		t.Logf("MovedAway events in %s: %v", from.name, away)
	}
	t.Logf("K11: %s -> %s: moved and adopted in %s; no Job in either plane, the fake cloud unchanged", from.name, to.name, time.Since(start).Round(time.Millisecond))
}

// checkAdopted waits until the copies in to adopted their state (no
// apply: noJobs fails the test at once on a Job) with the source's
// outputs, endpoint and provider ID, and returns their UIDs by kind.
func (r *moveRun) checkAdopted(ctx context.Context, t *testing.T, to plane, before snapshot, noJobs func()) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for _, o := range moved {
		var st *v1alpha1.WorkloadStatus
		r.waitFor(ctx, t, 3*time.Minute, fmt.Sprintf("%s: %s %s adopted its state, Ready", to.name, o.kind, o.name), func() (bool, string) {
			noJobs()
			obj, s, err := clusterctltest.Object(to.captf, tenant, o.kind, o.name)
			if err != nil {
				return false, err.Error()
			}
			st, uids[o.kind] = s, obj.GetUID()
			ready := meta.FindStatusCondition(s.Conditions, string(v1alpha1.ConditionReady))
			return s.LastApply != nil && s.LastApply.JobName == "(adopted from the state)" && clusterctltest.IsProvisioned(s) &&
					ready != nil && ready.Status == metav1.ConditionTrue,
				fmt.Sprintf("lastApply %+v, initialization %+v; %s", s.LastApply, s.Initialization, describeConds(s.Conditions))
		})
		if st.Outputs == nil || string(st.Outputs.Raw) != before.outputs[o.kind] {
			t.Errorf("K11: %s %s in %s: outputs %v, want the source's %s", o.kind, o.name, to.name, st.Outputs, before.outputs[o.kind])
		}
		if uids[o.kind] == before.uids[o.kind] {
			t.Fatalf("%s in %s has the source's UID: not a copy", o.kind, to.name)
		}
		r.waitEvent(ctx, t, to, o.kind, o.name, v1alpha1.EventStateAdopted)
	}
	tc, err := to.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := to.captf.InfrastructureV1alpha1().TerraformMachines(tenant).Get(ctx, machineName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tc.Spec.ControlPlaneEndpoint != before.endpoint || tm.Spec.ProviderID != before.provider {
		t.Errorf("K11: %s: endpoint %+v, provider ID %q; the source had %+v, %q", to.name, tc.Spec.ControlPlaneEndpoint, tm.Spec.ProviderID, before.endpoint, before.provider)
	}
	return uids
}

// checkStateMoved: every Secret a moved object owned in the source (its
// state, inputs Secret, state backups, the mirror; K11: "state Secrets
// (and backups, run Secrets) move with their object") is in to, owned by
// the copy, and gone from from; the state's data is the source's; the
// objects are gone from from.
func (r *moveRun) checkStateMoved(ctx context.Context, t *testing.T, from, to plane, before snapshot, uids map[string]types.UID) {
	t.Helper()
	for _, o := range moved {
		state := tfstate.SecretName(jobs.StateSuffix(o.kind, o.name))
		owned := before.owned[o.kind]
		for _, want := range []string{state, jobs.InputsSecretName(jobs.StateSuffix(o.kind, o.name))} {
			if !slices.Contains(owned, want) {
				t.Fatalf("K11: %s %s did not own %s in %s before the move (it owned %v)", o.kind, o.name, want, from.name, owned)
			}
		}
		if !slices.ContainsFunc(owned, func(n string) bool { return strings.HasPrefix(n, statebackup.Prefix) }) {
			t.Fatalf("K11: %s %s owned no state backup in %s before the move (it owned %v)", o.kind, o.name, from.name, owned)
		}
		t.Logf("%s %s: %d owned Secrets to move: %v", o.kind, o.name, len(owned), owned)
		for _, name := range owned {
			r.waitFor(ctx, t, time.Minute, to.name+": "+name+", owned by the copy, and gone from "+from.name, func() (bool, string) {
				s, err := to.kube.CoreV1().Secrets(tenant).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				if name == state && string(s.Data[tfstate.DataKey]) != string(before.states[name]) {
					t.Fatalf("K11: the state %s in %s is not the source's", name, to.name)
				}
				_, err = from.kube.CoreV1().Secrets(tenant).Get(ctx, name, metav1.GetOptions{})
				return slices.ContainsFunc(s.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == uids[o.kind] }) && apierrors.IsNotFound(err),
					fmt.Sprintf("owners in %s %v; in %s: %v", to.name, s.OwnerReferences, from.name, err)
			})
		}
		if _, _, err := clusterctltest.Object(from.captf, tenant, o.kind, o.name); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s still in %s after the move (%v)", o.kind, o.name, from.name, err)
		}
	}
}

// ownedSecrets names the Secrets of the tenant namespace in p owned by uid.
func ownedSecrets(ctx context.Context, t *testing.T, p plane, uid types.UID) []string {
	t.Helper()
	list, err := p.kube.CoreV1().Secrets(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if slices.ContainsFunc(s.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == uid }) {
			names = append(names, s.Name)
		}
	}
	return names
}

// checkIdentity: the identity moved (global: it stays in the source too);
// its source Secret did not: in each plane only what was there before the
// move (sourceRV, by plane), untouched, and nowhere else in to.
func (r *moveRun) checkIdentity(ctx context.Context, t *testing.T, from, to plane, sourceRV map[string]string) {
	t.Helper()
	if _, err := to.captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(ctx, identity, metav1.GetOptions{}); err != nil {
		t.Errorf("K11: the identity in %s: %v", to.name, err)
	}
	for _, p := range []plane{from, to} {
		s, err := p.kube.CoreV1().Secrets(cloudNamespace).Get(ctx, cloudSecret, metav1.GetOptions{})
		if err != nil {
			t.Errorf("K11: the identity's source Secret in %s after the move: %v", p.name, err)
		} else if s.ResourceVersion != sourceRV[p.name] {
			t.Errorf("K11: the move wrote the identity's source Secret in %s (resourceVersion %s, was %s)", p.name, s.ResourceVersion, sourceRV[p.name])
		}
	}
	named, err := to.kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + cloudSecret})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range named.Items {
		if s.Namespace != cloudNamespace {
			t.Errorf("K11: a Secret %s/%s in %s: the move copied the identity's source Secret", s.Namespace, s.Name, to.name)
		}
	}
}

// waitCAPIProvisioned waits until Cluster API in p sees the
// infrastructure provisioned with the same endpoint and provider ID.
func (r *moveRun) waitCAPIProvisioned(ctx context.Context, t *testing.T, p plane, before snapshot) {
	t.Helper()
	r.waitFor(ctx, t, 3*time.Minute, p.name+": Cluster API sees the Cluster's and the Machine's infrastructure provisioned", func() (bool, string) {
		c, err := p.dyn.Resource(capiClusterGVR).Namespace(tenant).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		m, err := p.dyn.Resource(capiMachineGVR).Namespace(tenant).Get(ctx, machineName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ci, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
		mi, _, _ := unstructured.NestedBool(m.Object, "status", "initialization", "infrastructureProvisioned")
		host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		return ci && mi && host == before.endpoint.Host && pid == before.provider,
			fmt.Sprintf("Cluster infrastructureProvisioned %v endpoint %q; Machine infrastructureProvisioned %v providerID %q", ci, host, mi, pid)
	})
}

// checkCloudUnchanged: the fake cloud holds exactly the resources it held
// (ids, names, creation, content, bootstrap data) and no Job asked it
// anything since (a Job's requests name their credential's source).
func (r *moveRun) checkCloudUnchanged(ctx context.Context, t *testing.T, before snapshot) {
	t.Helper()
	if got := r.cloud.resources(ctx, t, manifestToken); !reflect.DeepEqual(got, before.resources) {
		t.Errorf("K11: the fake cloud holds %+v, held %+v", got, before.resources)
	}
	for _, q := range r.cloud.seen(ctx, t) {
		if q.Seq > before.seq && (q.Source != "" || q.Method != "GET") {
			t.Errorf("K11: the fake cloud heard #%d %s %s (source %q) after the move began", q.Seq, q.Method, q.Path, q.Source)
		}
	}
}

// waitEvent waits for an event with reason about kind/name in p.
func (r *moveRun) waitEvent(ctx context.Context, t *testing.T, p plane, kind, name, reason string) {
	t.Helper()
	r.waitFor(ctx, t, time.Minute, fmt.Sprintf("%s: the %s event of %s %s", p.name, reason, kind, name), func() (bool, string) {
		evs, err := p.kube.CoreV1().Events(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name {
				reasons = append(reasons, ev.Reason)
			}
		}
		return slices.Contains(reasons, reason), fmt.Sprintf("events %v", reasons)
	})
}

// specChange: back in A, a spec change of the cluster applies once: one
// apply Job of the new generation, run on the node; the fake cloud sees
// its credential checks and no create or delete.
func (r *moveRun) specChange(ctx context.Context, t *testing.T) {
	e := r.env
	before := r.take(ctx, t, r.a)
	rec := clusterctltest.RecordJobs(ctx, t, e.kube, tenant)
	gen := e.setVariables(ctx, t, tcGVR, clusterName, map[string]any{"name": clusterName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "credential_checks": []string{"after-move"}})
	j := e.waitJobOfGeneration(ctx, t, before.uids[v1alpha1.KindTerraformCluster], v1alpha1.JobActionApply, gen)
	if done := e.waitJobDone(ctx, t, j.Name, 5*time.Minute); !jobSucceeded(done) {
		t.Fatalf("the apply Job %s of the change: %s; pods: %s", j.Name, jobState(done), e.podSummary(ctx, tenant))
	}
	e.waitCondition(ctx, t, tcGVR, clusterName, v1alpha1.ConditionApplyJobSucceeded, "True", gen)
	quiet := time.Now().Add(10 * time.Second)
	for time.Now().Before(quiet) {
		if js := rec.Names(); len(js) != 1 || !strings.HasPrefix(js[0], "apply ") {
			t.Fatalf("the change in A: Jobs %v, want exactly one apply", js)
		}
		time.Sleep(time.Second)
	}
	if got := e.cloud.resources(ctx, t, manifestToken); !reflect.DeepEqual(got, before.resources) {
		t.Errorf("the change's apply changed the fake cloud's resources: %+v, held %+v", got, before.resources)
	}
	var checks []string
	for _, q := range e.cloud.seen(ctx, t) {
		if q.Seq <= before.seq || q.Source == "" {
			continue
		}
		if q.Method != "GET" || q.Path != "/whoami" {
			t.Errorf("the change's apply: #%d %s %s, want its credential checks only (no create, no delete)", q.Seq, q.Method, q.Path)
		}
		checks = append(checks, q.Source)
	}
	if slices.Sort(checks); !slices.Equal(checks, []string{"env", "file"}) {
		t.Errorf("the change's apply: credential checks from %v, want one with the environment and one with the file (one run)", checks)
	}
}

// describeConds is a short form of conditions for messages.
func describeConds(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}
