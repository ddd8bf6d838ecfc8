package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/statelock"
	"github.com/captf/captf/test/integration/framework"
)

// TestStateLocksO3 proves O3 on the real API server with the manager's
// shipped RBAC: a lock held by anything else holds the next Job back
// (StateReadable=False/StateLocked) and is never broken, and once it goes
// StateReadable=True/StateRead (upstream A1-158); a lock the
// object's own finished Job left behind is released (ForceUnlocked) and
// the next Job starts.
func TestStateLocksO3(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "lock", "c")
	leases := f.Env.Kube.CoordinationV1().Leases(ns)
	lease := func(who string) *coordinationv1.Lease {
		info, _ := json.Marshal(statelock.LockInfo{ID: "id-" + who, Operation: "OperationTypeApply", Who: who, Created: time.Now().UTC()})
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: jobs.StateLeaseName(suffix),
			Annotations: map[string]string{statelock.AnnotationLockInfo: string(info)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("id-" + who)}}
	}
	newGeneration := func(image string) {
		t.Helper()
		f.EditCluster(ns, c.Name, func(cl *v1alpha1.TerraformCluster) { cl.Spec.Source.Image = image })
	}

	j1 := applyJob(f, ns, 1)
	if err := f.Env.FinishJob(f.Ctx, ns, j1.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// Someone at a terminal holds the lock: never broken.
	if _, err := leases.Create(f.Ctx, lease("alice@laptop"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newGeneration("example.com/module:2")
	cond := f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionStateReadable, metav1.ConditionFalse, v1alpha1.ReasonStateLocked)
	if !strings.Contains(cond.Message, "held by alice@laptop") {
		t.Errorf("O3: StateLocked names the holder: %q", cond.Message)
	}
	for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if x.Annotations[v1alpha1.AnnotationJobGeneration] == "2" {
			t.Fatalf("O3: apply Job %s started while the state is locked by someone else", x.Name)
		}
	}
	if l, err := leases.Get(f.Ctx, jobs.StateLeaseName(suffix), metav1.GetOptions{}); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "id-alice@laptop" {
		t.Fatalf("O3: the foreign lock was touched: %v %+v", err, l)
	}

	// Alice's lock goes; the lock a finished Job of the object left (its
	// pod killed while holding it) is released and the Job starts.
	if err := leases.Delete(f.Ctx, jobs.StateLeaseName(suffix), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Create(f.Ctx, lease("@"+j1.Name+"-x7k2p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	j2 := applyJob(f, ns, 2)
	l, err := leases.Get(f.Ctx, jobs.StateLeaseName(suffix), metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity != nil {
		t.Fatalf("O3: the stale lock of %s was not released before %s: %v %+v", j1.Name, j2.Name, err, l)
	}
	f.WaitFor("StateReadable=True/StateRead and a ForceUnlocked event", func() (bool, string) {
		got := f.GetCluster(ns, c.Name)
		if cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionStateReadable)); cond == nil ||
			cond.Status != metav1.ConditionTrue || cond.Reason != string(v1alpha1.ReasonStateRead) {
			return false, framework.Describe(got.Status.Conditions)
		}
		evs, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventForceUnlocked})
		if err != nil {
			return false, err.Error()
		}
		return len(evs.Items) > 0, fmt.Sprintf("%d ForceUnlocked events", len(evs.Items))
	})
}

// TestStateLockOfDeletedJobO3 proves O3 for a Job deleted while it ran
// (O2, A3-89; its pod killed holding the lock): the Job is gone from the
// object's Jobs, but its pod's name, the lock's holder, is one of the
// object's Job names, and no pod of that name runs, so the next Job
// releases it (ForceUnlocked) and starts, rather than the state staying
// StateLocked for good.
func TestStateLockOfDeletedJobO3(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "lockdel", "c")
	first := applyJob(f, ns, 1)
	info, _ := json.Marshal(statelock.LockInfo{ID: "id-1", Operation: "OperationTypeApply", Who: "@" + first.Name + "-x7k2p", Created: time.Now().UTC()})
	lock := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: jobs.StateLeaseName(suffix),
		Annotations: map[string]string{statelock.AnnotationLockInfo: string(info)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("id-1")}}
	if _, err := f.Env.Kube.CoordinationV1().Leases(ns).Create(f.Ctx, lock, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	background := metav1.DeletePropagationBackground
	if err := f.Env.Kube.BatchV1().Jobs(ns).Delete(f.Ctx, first.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("a new apply Job after the stale lock's release", func() (bool, string) {
		for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if j.UID != first.UID && j.DeletionTimestamp == nil {
				return true, ""
			}
		}
		got := f.GetCluster(ns, c.Name)
		return false, framework.Describe(got.Status.Conditions)
	})
	l, err := f.Env.Kube.CoordinationV1().Leases(ns).Get(f.Ctx, jobs.StateLeaseName(suffix), metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity != nil {
		t.Fatalf("O3: the lock of deleted Job %s was not released before the next Job: %v %+v", first.Name, err, l)
	}
	if cond := meta.FindStatusCondition(f.GetCluster(ns, c.Name).Status.Conditions, string(v1alpha1.ConditionStateReadable)); cond != nil {
		t.Errorf("O3: the lock of the object's own deleted Job was reported as %s/%s: %s", cond.Status, cond.Reason, cond.Message)
	}
	f.WaitFor("a ForceUnlocked event", func() (bool, string) {
		evs, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventForceUnlocked})
		if err != nil {
			return false, err.Error()
		}
		return len(evs.Items) > 0, fmt.Sprintf("%d ForceUnlocked events", len(evs.Items))
	})
}
