package workload

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/statelock"
)

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// lockLease is the backend's lock Lease of c1's state, held by who.
func lockLease(who string) *coordinationv1.Lease {
	info, _ := json.Marshal(statelock.LockInfo{ID: "lock-id-1", Operation: "OperationTypeApply", Who: who, Created: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: jobs.StateLeaseName(jobs.StateSuffix(kindCluster, "c1")),
			Annotations: map[string]string{statelock.AnnotationLockInfo: string(info)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("lock-id-1")},
	}
}

// counterValue reads the unlabelled counter name from the registry.
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() == name && len(family.GetMetric()) == 1 {
			return family.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("counter %s is not registered", name)
	return 0
}

func (f *fixture) storedLease() *coordinationv1.Lease {
	f.t.Helper()
	o, err := f.Kube.Tracker().Get(leasesGVR, testNS, jobs.StateLeaseName(jobs.StateSuffix(kindCluster, "c1")))
	require.NoError(f.t, err)
	return o.(*coordinationv1.Lease)
}

// SPEC O3 (A3-48): a lock the object's own finished Job left (its pod was
// killed holding it) is released before the next Job, once, with a
// ForceUnlocked event.
func TestO3StaleLockOfOwnJobReleased(t *testing.T) {
	f := newFixture(t)
	c := newCluster("c1", withFinalizer, generation(2))
	old := newJob(kindCluster, c, v1alpha1.JobActionApply, 1, jobFailed)
	f.seedReady(c, old)
	require.NoError(t, f.Kube.Tracker().Add(lockLease("@"+old.Name+"-x7k2p")))
	unlocks0 := counterValue(t, "captf_lock_force_unlocks_total")

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, unlocks0+1, counterValue(t, "captf_lock_force_unlocks_total"), "upstream A7-48's metric counts the release")
	require.Nil(t, f.storedLease().Spec.HolderIdentity, "released")
	require.NotContains(t, f.storedLease().Annotations, statelock.AnnotationLockInfo)
	require.Len(t, f.createdJobs(), 1, "the next Job starts")
	require.Contains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventForceUnlocked)
	require.Nil(t, meta.FindStatusCondition(f.lastStatus().Conditions, string(v1alpha1.ConditionStateReadable)))
}

// SPEC O3 (A3-49): a lock held by anything else is never broken: no Job,
// StateReadable=False/StateLocked naming the holder, one StateLocked
// event; once released, StateReadable=True/StateRead (upstream A1-158's
// True reason) and the Job starts.
func TestO3ForeignLockNeverBroken(t *testing.T) {
	f := newFixture(t)
	c := newCluster("c1", withFinalizer, generation(2))
	f.seedReady(c, newJob(kindCluster, c, v1alpha1.JobActionApply, 1, jobSucceeded))
	require.NoError(t, f.Kube.Tracker().Add(lockLease("alice@laptop")))

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, ptr.To("lock-id-1"), f.storedLease().Spec.HolderIdentity, "never broken")
	require.Empty(t, f.createdJobs())
	cond := requireCondition(t, f.lastStatus(), v1alpha1.ConditionStateReadable, metav1.ConditionFalse, v1alpha1.ReasonStateLocked)
	require.Contains(t, cond.Message, "held by alice@laptop for OperationTypeApply")
	require.Contains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventStateLocked)

	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.NotContains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventStateLocked, "once per lock, not per pass")

	l := f.storedLease()
	l.Spec.HolderIdentity = nil
	require.NoError(t, f.Kube.Tracker().Update(leasesGVR, l, testNS))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Len(t, f.createdJobs(), 1)
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionStateReadable, metav1.ConditionTrue, v1alpha1.ReasonStateRead)
}

// SPEC O3 (A3-48, A3-89): a lock left by a Job of the object that was
// deleted while it ran (gone from its Job set) is the object's: its
// holder's name is one of the object's Job names. It is released once
// no pod of that name runs, and waited for (never StateLocked) while one
// does.
func TestO3StaleLockOfDeletedJobReleased(t *testing.T) {
	for _, podRuns := range []bool{false, true} {
		t.Run(map[bool]string{false: "pod gone", true: "pod still runs"}[podRuns], func(t *testing.T) {
			f := newFixture(t)
			c := newCluster("c1", withFinalizer, generation(2))
			f.seedReady(c, newJob(kindCluster, c, v1alpha1.JobActionApply, 1, jobSucceeded))
			deleted := jobs.Name(kindCluster, "c1", c.UID, v1alpha1.JobActionApply, 2)
			holder := deleted + "-x7k2p"
			require.NoError(t, f.Kube.Tracker().Add(lockLease("@"+holder)))
			if podRuns {
				require.NoError(t, f.Kube.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: holder},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}))
			}
			// An ended pod of another name does not count.
			require.NoError(t, f.Kube.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "other"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}}))

			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Nil(t, meta.FindStatusCondition(f.lastStatus().Conditions, string(v1alpha1.ConditionStateReadable)), "never StateLocked")
			if podRuns {
				require.Equal(t, ptr.To("lock-id-1"), f.storedLease().Spec.HolderIdentity, "not released while its pod runs")
				require.Empty(t, f.createdJobs())
				require.NotContains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventStateLocked)
				return
			}
			require.Nil(t, f.storedLease().Spec.HolderIdentity, "released")
			require.Len(t, f.createdJobs(), 1, "the next Job starts")
			require.Contains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventForceUnlocked)
		})
	}
}
