package workload

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// forbidTypedLists fails the test on any LIST of resource through the typed
// client (B11: uncached LISTs read metadata only) and returns a counter of
// the metadata LISTs.
func (f *fixture) forbidTypedLists(resource string) *atomic.Int32 {
	var metadataLists atomic.Int32
	f.Kube.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if !f.meta.listing.Load() {
			f.t.Errorf("B11: an uncached LIST of whole %s", resource)
		} else {
			metadataLists.Add(1)
		}
		return false, nil, nil
	})
	return &metadataLists
}

// bigForeignJob is a Job labelled captf.io/managed=true with a large pod
// template, controlled by another object: what a tenant can put in the
// namespace (past B3's admission policy).
func bigForeignJob(i int) *batchv1.Job {
	j := newJob(v1alpha1.KindTerraformCluster, newCluster(fmt.Sprintf("other-%d", i)), v1alpha1.JobActionApply, 1, jobRunning)
	j.Spec.Template.Spec.Containers[0].Env = append(j.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "BIG", Value: strings.Repeat("x", 256<<10)})
	return j
}

// B11, J1: the fresh Job read before a new apply Job reads the metadata of
// the namespace's managed Jobs (never whole Jobs), GETs only the object's
// own Jobs that the cache does not hold at the listed version, and still
// sees a Job the cache has not delivered, so no second Job starts.
func TestFreshJobsReadsMetadataB11(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer, generation(2))
	done := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded)
	done.ResourceVersion = "5"
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)), done)
	// The apply Job of generation 2, in the API server only: the cache
	// lags the pass that created it.
	running := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 2, jobRunning)
	running.ResourceVersion = "9"
	require.NoError(t, f.Kube.Tracker().Add(running))
	for i := range 8 {
		require.NoError(t, f.Kube.Tracker().Add(bigForeignJob(i)))
	}
	lists := f.forbidTypedLists("jobs")
	f.resetActions()

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Empty(t, f.createdJobNames(), "J1: the running apply Job was found")
	require.Equal(t, []string{"get jobs " + testNS + "/" + running.Name}, f.readsOf("jobs"),
		"one GET: the own Job the cache lacks; not the cached one at its version, not the foreign ones")
	require.Equal(t, int32(1), lists.Load())
}

// B11: a cached Job at another version than the one listed is read again,
// and what the read returns is trimmed as the cache trims (no pod
// template); a Job another object controls is not the object's.
func TestFreshJobB11(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1")
	cached := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobRunning)
	cached.ResourceVersion = "5"
	f.seed(cached)
	stored := cached.DeepCopy()
	stored.ResourceVersion = "6"
	stored.Status = newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded).Status
	require.NoError(t, f.Kube.Tracker().Update(batchJobs(), stored, testNS))
	ctx := f.Ctx

	f.resetActions()
	j, err := f.c.freshJob(ctx, testNS, cached.Name, "5", c1.UID)
	require.NoError(t, err)
	require.Equal(t, "5", j.ResourceVersion, "the cached copy at the listed version")
	require.Empty(t, f.readsOf("jobs"))

	j, err = f.c.freshJob(ctx, testNS, cached.Name, "6", c1.UID)
	require.NoError(t, err)
	require.Equal(t, stored.Status, j.Status, "the API server's copy")
	require.Empty(t, j.Spec.Template.Spec.Containers, "B1: trimmed as the cache trims")
	require.Len(t, f.readsOf("jobs"), 1)

	j, err = f.c.freshJob(ctx, testNS, cached.Name, "6", types.UID("uid-other"))
	require.NoError(t, err)
	require.Nil(t, j, "controlled by another object")
	j, err = f.c.freshJob(ctx, testNS, "gone", "1", c1.UID)
	require.NoError(t, err)
	require.Nil(t, j)
}

// B11: a fresh read keeps at most maxFreshJobs of the object's Jobs; past
// that it fails, naming the limit, and starts nothing.
func TestFreshJobsBudgetB11(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1")
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1)
	for i := range maxFreshJobs + 1 {
		j := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobFailed)
		j.Name = fmt.Sprintf("forged-%d", i)
		j.Spec = batchv1.JobSpec{}
		require.NoError(t, f.Kube.Tracker().Add(j))
	}

	err := f.sync(v1alpha1.KindTerraformCluster, "c1")
	require.ErrorContains(t, err, fmt.Sprintf("more than %d Jobs labelled captf.io/managed=true are controlled by this object", maxFreshJobs))
	require.Empty(t, f.createdJobNames())
	require.Empty(t, f.readsOf("jobs"), "nothing is read past the budget")
}

// B11, B15: the state clean-up after a destroy lists Secret metadata only,
// and deletes the backend's names of the suffix alone.
func TestDeleteStateReadsMetadataB11(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting)
	suffix := jobs.StateSuffix(v1alpha1.KindTerraformCluster, "c1")
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionDestroy, 1, jobSucceeded))
	f.putState(stateSecretOf(v1alpha1.KindTerraformCluster, c1, "", []byte("state")))
	f.putState(stateSecretOf(v1alpha1.KindTerraformCluster, c1, "tfstate-default-"+suffix+"-part-7", []byte("part")))
	for i := range 20 {
		s := stateSecretOf(v1alpha1.KindTerraformCluster, c1, fmt.Sprintf("look-alike-%d", i), make([]byte, 64<<10))
		f.putState(s)
	}
	lists := f.forbidTypedLists("secrets")
	f.resetActions()

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	var deleted []string
	for _, a := range f.writeActions() {
		if a.verb == "delete" && a.resource == "secrets" && a.name != mirrorName {
			deleted = append(deleted, a.name)
		}
	}
	require.ElementsMatch(t, []string{"tfstate-default-" + suffix, "tfstate-default-" + suffix + "-part-7"}, deleted)
	require.Equal(t, int32(1), lists.Load())
	for i := range 20 {
		require.NotNil(t, f.storedSecret(testNS, fmt.Sprintf("look-alike-%d", i)))
	}
}

// B10, T4: a pass that starts before the cache has caught up with the
// status write of the read (an event queued the key meanwhile) does not
// read the state again: the result written is kept. The full attack test
// saw the slowest bomb read twice that way.
func TestOutputsNotReadAgainOnAStaleCacheB10(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t)
	f.Secrets = append(f.Secrets, sensitiveOutput)
	obj := f.applied(kind, 1)
	f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip([]byte(`[0,0,0]`))))
	calls := f.countStateCalls()
	f.catchUp()

	require.NoError(t, f.sync(kind, "obj"))
	require.Len(t, calls.take(), 1)
	written := f.lastStatus()
	requireCondition(t, written, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsReadFailed)

	// No catchUp: the cache still holds the status from before the read.
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, calls.take(), "the state is read once")
	st := f.lastStatus()
	require.Equal(t, written.OutputsSource, st.OutputsSource)
	requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsReadFailed)
}
