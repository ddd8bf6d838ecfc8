package workload

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// sensitiveOutput is the value of a sensitive Terraform output: it never
// leaves the state Secret (T4, X1). Each test adds it to f.Secrets, so
// the fixture's X1 scan looks for it in every log line, event, condition
// and status written.
const sensitiveOutput = "tf-out-S3NSITIVE-9d1e"

// stateSecretOf is kind's object o's state Secret as the kubernetes backend
// writes it (T2): gzip of the state JSON under key tfstate, its four labels
// and the encoding annotation.
func stateSecretOf(kind string, o metav1.Object, name string, data []byte) *corev1.Secret {
	suffix := jobs.StateSuffix(kind, o.GetName())
	if name == "" {
		name = tfstate.SecretName(suffix)
	}
	s := tfstatetest.Secret(o.GetNamespace(), name, suffix, data)
	s.UID = types.UID("uid-" + name)
	return s
}

// putState creates or replaces the state Secret in the fake API server.
func (f *fixture) putState(s *corev1.Secret) {
	f.t.Helper()
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	if _, err := f.Kube.Tracker().Get(gvr, s.Namespace, s.Name); err == nil {
		require.NoError(f.t, f.Kube.Tracker().Update(gvr, s, s.Namespace))
		return
	}
	require.NoError(f.t, f.Kube.Tracker().Add(s))
}

// stateCalls counts every call on Secrets other than the source Secret
// (the state's GETs and LISTs; the fixture's recorder skips lists).
type stateCalls struct {
	mu    sync.Mutex
	calls []string
}

func (f *fixture) countStateCalls() *stateCalls {
	sc := &stateCalls{}
	f.Kube.PrependReactor("*", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := ""
		switch x := a.(type) {
		case k8stesting.GetAction:
			name = x.GetName()
		case k8stesting.DeleteAction:
			name = x.GetName()
		case k8stesting.CreateAction:
			if m, err := meta.Accessor(x.GetObject()); err == nil {
				name = m.GetName()
			}
		}
		if name == sourceName || name == mirrorName || a.GetNamespace() == "" ||
			strings.HasPrefix(name, jobs.RunSecretPrefix) || strings.HasPrefix(name, jobs.InputsSecretPrefix) {
			// Not the state: the source, the mirror, the fixture's
			// catchUp, a run's inputs (K5, K6; inputs_test.go).
			return false, nil, nil
		}
		if a.GetVerb() == "patch" {
			// Marking the state after its read (K11; move_test.go), not
			// a read.
			return false, nil, nil
		}
		desc := a.GetVerb() + " " + a.GetNamespace() + "/" + name
		if l, ok := a.(k8stesting.ListAction); ok {
			desc += " " + l.GetListRestrictions().Labels.String()
		}
		sc.mu.Lock()
		sc.calls = append(sc.calls, desc)
		sc.mu.Unlock()
		return false, nil, nil
	})
	return sc
}

func (sc *stateCalls) take() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := sc.calls
	sc.calls = nil
	return out
}

// applied seeds kind's object at generation gen with the finalizer, its
// identity, source and mirror, and a succeeded apply Job per generation
// 1..gen.
func (f *fixture) applied(kind string, gen int64) metav1.Object {
	f.t.Helper()
	obj := workloadOf(kind, "obj", withFinalizer, generation(gen))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
		newMirror(identityName, testNS, sourceData(), refOf(kind, obj)))
	for g := int64(1); g <= gen; g++ {
		f.seed(newJob(kind, obj, v1alpha1.JobActionApply, g, jobSucceeded))
	}
	return obj
}

// newGeneration bumps the object to gen, with a succeeded apply Job of it
// (outcome), and lets the caches catch up.
func (f *fixture) newGeneration(kind string, obj metav1.Object, gen int64, outcome jobOutcome) {
	f.t.Helper()
	gvr := v1alpha1.SchemeGroupVersion.WithResource(resourceOf(kind))
	stored, err := f.Captf.Tracker().Get(gvr, testNS, obj.GetName())
	require.NoError(f.t, err)
	m := stored.(metav1.Object)
	m.SetGeneration(gen)
	require.NoError(f.t, f.Captf.Tracker().Update(gvr, stored, testNS))
	require.NoError(f.t, f.Kube.Tracker().Add(newJob(kind, obj, v1alpha1.JobActionApply, gen, outcome)))
	f.catchUp()
}

func outputsOf(st *v1alpha1.WorkloadStatus) string {
	if st.Outputs == nil {
		return ""
	}
	return string(st.Outputs.Raw)
}

// successCriteriaMetOnly leaves j with only its SuccessCriteriaMet
// condition: the Job controller has decided it succeeded but its pod has
// not ended yet (no Complete), so it is not finished (J7) and T7 does not
// record it yet.
func successCriteriaMetOnly(t *testing.T, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	var only []batchv1.JobCondition
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobSuccessCriteriaMet {
			only = append(only, c)
		}
	}
	require.Len(t, only, 1)
	j.Status.Conditions = only
	require.False(t, jobs.Finished(j))
	return j
}

// withStatus edits the status of a seeded workload object of any kind.
func withStatus(fn func(*v1alpha1.WorkloadStatus)) func(metav1.Object) {
	return func(o metav1.Object) {
		switch x := o.(type) {
		case *v1alpha1.TerraformCluster:
			fn(&x.Status)
		case *v1alpha1.TerraformMachine:
			fn(&x.Status)
		case *v1alpha1.TerraformMachinePool:
			fn(&x.Status)
		}
	}
}

// succeededRecord is status.lastApply of kind's object o after its apply
// Job of generation 1 succeeded (T7).
func succeededRecord(kind string, o metav1.Object) *v1alpha1.RunRecord {
	return &v1alpha1.RunRecord{
		Generation: 1, JobName: jobs.Name(kind, o.GetName(), o.GetUID(), v1alpha1.JobActionApply, 1),
		Outcome: v1alpha1.RunSucceeded, FinishTime: metav1.NewTime(epoch.Add(-time.Hour)), Attempt: 1,
	}
}

// T4, T5: after a successful apply the state is read once, uncached (one
// GET of the state Secret), the non-sensitive outputs and the sensitive
// names are published, and the object is provisioned; a steady pass then
// makes no request at all. Every kind, with its own state suffix.
func TestOutputsReadOncePerSuccessfulApply(t *testing.T) {
	for _, kind := range []string{v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			f.Secrets = append(f.Secrets, sensitiveOutput)
			obj := f.applied(kind, 1)
			state := stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{
				"provider_id": `"fake://m-1"`, "endpoint": `{"port": 6443, "host": "10.0.0.1"}`,
			})))
			require.Equal(t, jobs.StateSecretName(jobs.StateSuffix(kind, "obj")), state.Name, "T2's name")
			f.putState(state)
			calls := f.countStateCalls()
			f.catchUp()

			require.NoError(t, f.sync(kind, "obj"))

			require.Equal(t, []string{"get " + testNS + "/" + state.Name}, calls.take(), "one uncached GET of the state")
			st := f.lastStatus()
			c := requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
			require.Contains(t, c.Message, state.Name)
			require.Equal(t, `{"endpoint":{"host":"10.0.0.1","port":6443},"provider_id":"fake://m-1"}`, outputsOf(st))
			require.Equal(t, []string{"admin_password"}, st.SensitiveOutputs)
			require.NotNil(t, st.Initialization)
			require.Equal(t, true, *st.Initialization.Provisioned)
			wantJob := jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 1)
			require.Equal(t, wantJob, st.OutputsSource.JobName)
			requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)

			// Steady passes: nothing read, nothing written.
			f.steadyPasses(kind, "obj")
			require.Empty(t, calls.take(), "a steady pass reads no state")
			require.Empty(t, f.writes())
		})
	}
}

// T4: each failure has its reason, keeps the last good outputs, and is
// not read again in a loop; the next successful apply reads again. T5:
// provisioned stays true throughout.
func TestOutputsFailuresKeepLastGoodOutputs(t *testing.T) {
	over := `"` + strings.Repeat("x", 33<<10) + `"`
	bomb := func(t *testing.T) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zeros := make([]byte, 1<<20)
		for i := 0; i < 20; i++ {
			_, _ = w.Write(zeros)
		}
		require.NoError(t, w.Close())
		return b.Bytes()
	}
	tests := []struct {
		name   string
		state  func(t *testing.T, s *corev1.Secret) *corev1.Secret // nil: no Secret
		reason v1alpha1.ConditionReason
	}{
		{"no state Secret", func(*testing.T, *corev1.Secret) *corev1.Secret { return nil }, v1alpha1.ReasonStateNotFound},
		{"no tfstate key", func(_ *testing.T, s *corev1.Secret) *corev1.Secret { s.Data = nil; return s }, v1alpha1.ReasonStateNotFound},
		{"not gzip", func(_ *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = tfstatetest.State(sensitiveOutput, nil)
			return s
		}, v1alpha1.ReasonOutputsReadFailed},
		{"not JSON", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = tfstatetest.Gzip([]byte("password = " + sensitiveOutput))
			return s
		}, v1alpha1.ReasonOutputsReadFailed},
		{"encrypted", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = tfstatetest.Gzip([]byte(`{"meta":{},"encrypted_data":"AAAA","encryption_version":"v0"}`))
			return s
		}, v1alpha1.ReasonOutputsReadFailed},
		{"decompression bomb", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = bomb(t)
			return s
		}, v1alpha1.ReasonOutputsReadFailed},
		// B10: bombs whose JSON the old decoder held in memory and decoded
		// into Go values (hundreds of MiB) before any limit applied.
		{"B10 an output of [0,0,0,...] 16 MiB", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = gzipRepeat(t, `{"version":4,"outputs":{"x":{"value":[`, "0,", `0]}}}`, 8<<20-32)
			return s
		}, v1alpha1.ReasonOutputsReadFailed},
		{"B10 an output of [0,0,0,...] 1 MiB", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = gzipRepeat(t, `{"version":4,"outputs":{"x":{"value":[`, "0,", `0]}}}`, 1<<19)
			return s
		}, v1alpha1.ReasonOutputsTooLarge},
		{"B10 nested 16 MiB deep", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = gzipRepeat(t, `{"version":4,"outputs":{"x":{"value":`, "[", "", 16<<20-64)
			return s
		}, v1alpha1.ReasonOutputsReadFailed},
		{"outputs over 32 KiB", func(t *testing.T, s *corev1.Secret) *corev1.Secret {
			s.Data["tfstate"] = tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"blob": over}))
			return s
		}, v1alpha1.ReasonOutputsTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const kind = v1alpha1.KindTerraformCluster
			f := newFixture(t)
			f.Secrets = append(f.Secrets, sensitiveOutput)
			obj := f.applied(kind, 1)
			good := stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"net-1"`})))
			f.putState(good)
			calls := f.countStateCalls()
			f.catchUp()
			require.NoError(t, f.sync(kind, "obj"))
			requireCondition(t, f.lastStatus(), v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
			calls.take()

			// The state goes bad; a new apply succeeds.
			bad := tc.state(t, good.DeepCopy())
			if bad == nil {
				require.NoError(t, f.Kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), testNS, good.Name))
			} else {
				f.putState(bad)
			}
			f.newGeneration(kind, obj, 2, jobSucceeded)
			require.NoError(t, f.sync(kind, "obj"))

			require.Len(t, calls.take(), 1, "one read after the new apply")
			st := f.lastStatus()
			c := requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, tc.reason)
			require.Contains(t, c.Message, "after the next successful apply")
			require.Equal(t, `{"id":"net-1"}`, outputsOf(st), "the last good outputs stay")
			require.Equal(t, []string{"admin_password"}, st.SensitiveOutputs)
			require.True(t, *st.Initialization.Provisioned)
			require.Equal(t, jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 2), st.OutputsSource.JobName)

			// Not read again in a loop.
			f.steadyPasses(kind, "obj")
			require.Empty(t, calls.take(), "a failed state is not read again on a steady pass")
			require.Empty(t, f.writes())

			// The next successful apply reads the repaired state.
			f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"net-3"`}))))
			f.newGeneration(kind, obj, 3, jobSucceeded)
			require.NoError(t, f.sync(kind, "obj"))
			require.Len(t, calls.take(), 1)
			st = f.lastStatus()
			requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
			require.Equal(t, `{"id":"net-3"}`, outputsOf(st))
		})
	}
}

// T4, T5, T7: the read follows status.lastApply, not the Job cache. A Job
// whose success criteria are met but whose pod has not ended (no Complete
// condition, so not finished and not recorded) is not read, however many
// passes see it, and does not provision; once it is Complete, the pass
// that records it reads the state exactly once. Found by the end-to-end
// test on a real node: outputs read ahead of the record let T5's field
// write make a generation the manager then applied again.
func TestOutputsWaitForTheRecord(t *testing.T) {
	for _, kind := range []string{v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			f.Secrets = append(f.Secrets, sensitiveOutput)
			obj := workloadOf(kind, "obj", withFinalizer, generation(1))
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
				newMirror(identityName, testNS, sourceData(), refOf(kind, obj)),
				successCriteriaMetOnly(t, newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded)))
			f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"net-1"`}))))
			calls := f.countStateCalls()
			f.catchUp()

			for i := 0; i < 3; i++ {
				require.NoError(t, f.sync(kind, "obj"))
				f.catchUp()
				f.Clock.Step(syncPeriod)
			}
			require.Empty(t, calls.take(), "no read before the apply is recorded")
			stored := f.storedObj(kind, "obj")
			var st v1alpha1.WorkloadStatus
			withStatus(func(s *v1alpha1.WorkloadStatus) { st = *s })(stored)
			require.Nil(t, st.LastApply, "not finished: not recorded (T7)")
			require.Nil(t, st.Outputs)
			require.Nil(t, st.OutputsSource)
			require.Nil(t, st.Initialization, "not provisioned before the record")
			require.Empty(t, f.createdJobs())

			// The pod ends: the Job is Complete, this pass records it and
			// reads the state once.
			finished := newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded)
			require.NoError(t, f.Kube.Tracker().Update(batchJobs(), finished, testNS))
			f.catchUp()
			require.NoError(t, f.sync(kind, "obj"))

			require.Len(t, calls.take(), 1, "one read once the apply is recorded")
			last := f.lastStatus()
			require.Equal(t, finished.Name, last.LastApply.JobName)
			require.Equal(t, v1alpha1.RunSucceeded, last.LastApply.Outcome)
			require.Equal(t, finished.Name, last.OutputsSource.JobName)
			require.True(t, last.OutputsSource.JobCreationTimestamp.Equal(&finished.CreationTimestamp), "informational, from the cache")
			require.Equal(t, `{"id":"net-1"}`, outputsOf(last))
			require.True(t, *last.Initialization.Provisioned)
			requireCondition(t, last, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)

			f.steadyPasses(kind, "obj")
			require.Empty(t, calls.take(), "read exactly once")
			require.Empty(t, f.writes())
		})
	}
}

// T4, T7: the read keys on the record, so a recorded successful apply
// whose Job is gone from the cache (pruned, deleted, a TTL) before its
// state was read is still read, once; jobCreationTimestamp, informational,
// is then unset. No Job runs: the record says the generation is applied.
func TestOutputsReadForARecordedJobThatIsGone(t *testing.T) {
	for _, kind := range []string{v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			f.Secrets = append(f.Secrets, sensitiveOutput)
			obj := workloadOf(kind, "obj", withFinalizer, generation(1))
			rec := succeededRecord(kind, obj)
			withStatus(func(s *v1alpha1.WorkloadStatus) { s.LastApply = rec.DeepCopy() })(obj)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
				newMirror(identityName, testNS, sourceData(), refOf(kind, obj)))
			f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"net-1"`}))))
			calls := f.countStateCalls()
			f.catchUp()

			require.NoError(t, f.sync(kind, "obj"))

			require.Equal(t, []string{"get " + testNS + "/" + tfstate.SecretName(jobs.StateSuffix(kind, "obj"))}, calls.take())
			st := f.lastStatus()
			require.Equal(t, rec.JobName, st.OutputsSource.JobName)
			require.True(t, st.OutputsSource.JobCreationTimestamp.IsZero(), "the Job is gone: no creation time to give")
			require.Equal(t, `{"id":"net-1"}`, outputsOf(st))
			require.Equal(t, []string{"admin_password"}, st.SensitiveOutputs)
			require.True(t, *st.Initialization.Provisioned)
			require.Equal(t, rec, st.LastApply, "the record is kept as it is")
			require.Empty(t, f.createdJobs())

			f.steadyPasses(kind, "obj")
			require.Empty(t, calls.take(), "read once")
			require.Empty(t, f.writes())
		})
	}
}

// T4: only a successful apply reads the state; T5: only it provisions.
func TestOutputsNotReadWithoutSuccessfulApply(t *testing.T) {
	for name, outcome := range map[string]jobOutcome{"running": jobRunning, "failed": jobFailed, "deadline": jobDeadlineExceeded} {
		t.Run(name, func(t *testing.T) {
			const kind = v1alpha1.KindTerraformCluster
			f := newFixture(t)
			obj := workloadOf(kind, "obj", withFinalizer)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
				newMirror(identityName, testNS, sourceData(), refOf(kind, obj)),
				newJob(kind, obj, v1alpha1.JobActionApply, 1, outcome))
			f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, nil))))
			calls := f.countStateCalls()
			f.catchUp()

			require.NoError(t, f.sync(kind, "obj"))

			require.Empty(t, calls.take())
			st := f.lastStatus()
			require.Nil(t, st.Initialization)
			require.Nil(t, st.Outputs)
			require.Nil(t, st.OutputsSource)
			for _, c := range st.Conditions {
				require.NotEqual(t, string(v1alpha1.ConditionOutputsAvailable), c.Type)
			}
		})
	}
}

// T5: provisioned stays true after a later apply fails and after every
// Job is gone (a TTL, pruning); T4, T7: the record decides, so an older
// successful Job left after the recorded one was deleted reads nothing,
// and neither does a failed apply.
func TestOutputsProvisionedStaysTrue(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t)
	obj := f.applied(kind, 2)
	f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"a"`}))))
	calls := f.countStateCalls()
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Len(t, calls.take(), 1)
	require.Equal(t, jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 2), f.lastStatus().OutputsSource.JobName, "the newest successful apply")
	f.catchUp()

	// The generation-2 Job is deleted: the record still names it, so
	// generation 1's Job, still in the cache, reads nothing.
	jobsGVR := batchJobs()
	require.NoError(t, f.Kube.Tracker().Delete(jobsGVR, testNS, jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 2)))
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, calls.take())

	// A failed apply of generation 3, then every Job gone.
	f.newGeneration(kind, obj, 3, jobFailed)
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, calls.take())
	require.Equal(t, v1alpha1.RunFailed, f.lastStatus().LastApply.Outcome)
	for _, g := range []int64{1, 3} {
		require.NoError(t, f.Kube.Tracker().Delete(jobsGVR, testNS, jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, g)))
	}
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, calls.take())
	for _, st := range f.statusWrites() {
		require.True(t, *st.Initialization.Provisioned, "never turned false")
		require.Equal(t, `{"id":"a"}`, outputsOf(st))
	}
	stored, err := f.Captf.InfrastructureV1alpha1().TerraformClusters(testNS).Get(f.Ctx, "obj", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, *stored.Status.Initialization.Provisioned)
}

// An API error reading the state records nothing about the read (no
// outputsSource) and is retried (the sync returns it); the apply itself
// stays recorded (T7). The retry reads once and publishes, even when the
// Job was pruned in between: the read keys on the record.
func TestOutputsAPIErrorIsRetried(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t)
	obj := f.applied(kind, 1)
	state := stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"a"`})))
	f.putState(state)
	calls := f.countStateCalls()
	f.catchUp()
	fail := true
	f.prependKubeReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if fail && a.(k8stesting.GetAction).GetName() == state.Name {
			return true, nil, apierrors.NewServiceUnavailable("etcd is sad")
		}
		return false, nil, nil
	})

	err := f.sync(kind, "obj")
	require.ErrorContains(t, err, "etcd is sad")
	require.Len(t, calls.take(), 1)
	st := f.lastStatus()
	require.Nil(t, st.OutputsSource, "nothing recorded: the read is retried")
	require.True(t, *st.Initialization.Provisioned)
	job := jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 1)
	require.Equal(t, job, st.LastApply.JobName, "the apply is recorded all the same")

	fail = false
	require.NoError(t, f.Kube.Tracker().Delete(batchJobs(), testNS, job))
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Len(t, calls.take(), 1)
	st = f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	require.Equal(t, job, st.OutputsSource.JobName)
	require.Equal(t, `{"id":"a"}`, outputsOf(st))

	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, calls.take())
}

// T4 during a deletion: an apply that finishes while the object is being
// deleted is recorded (T7: its outcome decides the destroy), but its state
// is not read for outputs; the destroy Job starts.
func TestOutputsNotReadDuringDeletion(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t)
	obj := workloadOf(kind, "obj", deleting, generation(1))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
		newMirror(identityName, testNS, sourceData(), refOf(kind, obj)),
		newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded))
	f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"id": `"a"`}))))
	calls := f.countStateCalls()
	f.catchUp()

	require.NoError(t, f.sync(kind, "obj"))

	require.Empty(t, calls.take())
	st := f.lastStatus()
	require.Equal(t, jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 1), st.LastApply.JobName)
	require.Nil(t, st.OutputsSource)
	require.Nil(t, st.Outputs)
	require.Equal(t, []string{jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionDestroy, 1)}, f.createdJobNames())
}

// T4, split state: a first chunk of exactly tfstate.ChunkSize bytes makes
// the manager GET the next part by its name, and so on while the chunks are
// full (B11: no LIST); a Secret with the labels but another name is never
// read.
func TestOutputsSplitState(t *testing.T) {
	const kind = v1alpha1.KindTerraformMachine
	f := newFixture(t)
	f.Secrets = append(f.Secrets, sensitiveOutput)
	obj := f.applied(kind, 1)
	// Incompressible padding so the gzip spans three chunks.
	pad := make([]byte, 0, 4<<20)
	for x := uint32(1); len(pad) < cap(pad); x = x*1664525 + 1013904223 {
		pad = append(pad, "abcdefghijklmnopqrstuvwxyz0123456789"[x>>24%36])
	}
	state := tfstatetest.State(sensitiveOutput, map[string]string{"id": `"net-1"`})
	state = append(state[:len(state)-1], []byte(`,"padding":"`+string(pad)+`"}`)...)
	compressed := tfstatetest.Gzip(state)
	require.Greater(t, len(compressed), 2*tfstate.ChunkSize)
	suffix := jobs.StateSuffix(kind, "obj")
	for i := 0; len(compressed) > 0; i++ {
		n := min(tfstate.ChunkSize, len(compressed))
		f.putState(stateSecretOf(kind, obj, tfstate.PartName(suffix, i), compressed[:n]))
		compressed = compressed[n:]
	}
	f.putState(stateSecretOf(kind, obj, "decoy", []byte("not a part")))
	calls := f.countStateCalls()
	f.catchUp()

	require.NoError(t, f.sync(kind, "obj"))

	require.Equal(t, []string{
		"get " + testNS + "/" + tfstate.SecretName(suffix),
		"get " + testNS + "/" + tfstate.PartName(suffix, 1),
		"get " + testNS + "/" + tfstate.PartName(suffix, 2),
	}, calls.take())
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	require.Equal(t, `{"id":"net-1"}`, outputsOf(st))
	require.Equal(t, []string{"admin_password"}, st.SensitiveOutputs)
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.NotContains(t, string(b), sensitiveOutput)
}

// gzipRepeat is a gzip of head, n copies of unit, and tail: a bomb of a
// few KiB.
func gzipRepeat(t *testing.T, head, unit, tail string, n int) []byte {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	require.NoError(t, err)
	_, _ = w.Write([]byte(head))
	chunk := []byte(strings.Repeat(unit, (64<<10)/len(unit)))
	per := len(chunk) / len(unit)
	for i := 0; i < n; i += per {
		_, _ = w.Write(chunk[:min(per, n-i)*len(unit)])
	}
	_, _ = w.Write([]byte(tail))
	require.NoError(t, w.Close())
	return b.Bytes()
}

func batchJobs() schema.GroupVersionResource {
	return batchv1.SchemeGroupVersion.WithResource("jobs")
}

// steadyPasses brings the caches up to date and runs three passes of
// kind/name one sync period apart, as the resync ticker would.
func (f *fixture) steadyPasses(kind, name string) {
	f.t.Helper()
	f.catchUp()
	for i := 0; i < 3; i++ {
		f.Clock.Step(syncPeriod)
		require.NoError(f.t, f.sync(kind, name))
	}
}
