package engine

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
)

// sensitiveOutputValue is the value of a sensitive Terraform output in the
// states these tests write: it must never leave the state Secret (T4), and
// TestX1NoSecretValueAnywhere scans for it at the end (X1).
const sensitiveOutputValue = "x1-tf-output-S3NSITIVE-51c2"

// writeState stores data as the kubernetes backend's Put does: GET the
// Secret; if missing, CREATE it with the four labels and the encoding
// annotation and no data; then UPDATE it with data.tfstate (T2; see
// docs/runtime-environment.md). nil data deletes the Secret.
func writeState(f *framework.Fixture, ns, suffix, name string, data []byte) {
	f.T.Helper()
	secrets := f.Env.Kube.CoreV1().Secrets(ns)
	if data == nil {
		if err := secrets.Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			f.T.Fatal(err)
		}
		return
	}
	s, err := secrets.Get(f.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s, err = secrets.Create(f.Ctx, tfstatetest.Secret(ns, name, suffix, nil), metav1.CreateOptions{})
	}
	if err != nil {
		f.T.Fatal(err)
	}
	s.Data = map[string][]byte{tfstate.DataKey: data}
	if _, err := secrets.Update(f.Ctx, s, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// applyJob waits for the cluster's apply Job of generation gen.
func applyJob(f *framework.Fixture, ns string, gen int64) batchv1.Job {
	f.T.Helper()
	var j batchv1.Job
	f.WaitFor("apply Job of generation "+strconv.FormatInt(gen, 10), func() (bool, string) {
		for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if x.Annotations[v1alpha1.AnnotationJobGeneration] == strconv.FormatInt(gen, 10) {
				j = x
				return true, ""
			}
		}
		return false, "not yet"
	})
	return j
}

// waitOutputs waits until the cluster's outputs follow Job j with
// OutputsAvailable's reason, and returns the cluster.
func waitOutputs(f *framework.Fixture, ns, name string, j batchv1.Job, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) *v1alpha1.TerraformCluster {
	f.T.Helper()
	var c *v1alpha1.TerraformCluster
	f.WaitFor("outputs after "+j.Name, func() (bool, string) {
		var err error
		c, err = f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, string(v1alpha1.ConditionOutputsAvailable))
		src := c.Status.OutputsSource
		return src != nil && src.JobName == j.Name && cond != nil && cond.Status == status && cond.Reason == string(reason),
			fmt.Sprintf("outputsSource %+v, %s", src, framework.Describe(c.Status.Conditions))
	})
	return c
}

// nextGeneration changes the cluster's variables (a new generation, J1).
func nextGeneration(f *framework.Fixture, ns, name string, step int) {
	f.T.Helper()
	f.EditCluster(ns, name, func(c *v1alpha1.TerraformCluster) {
		c.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"step":` + strconv.Itoa(step) + `}`)}
	})
}

func outputsJSON(c *v1alpha1.TerraformCluster) string {
	if c.Status.Outputs == nil {
		return ""
	}
	return string(c.Status.Outputs.Raw)
}

// TestOutputsFromKubernetesBackendState proves T4 and T5 on the real API
// server, with the state Secret in the kubernetes backend's own format:
// after each successful apply the manager (with the shipped RBAC, X2)
// publishes the non-sensitive outputs and the sensitive names, marks the
// cluster provisioned, and on every kind of bad state reports the reason
// while the last good outputs stay; the next good state is read again.
func TestOutputsFromKubernetesBackendState(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "outputs", "net")
	name := tfstate.SecretName(suffix)

	// Generation 1: a good state.
	j := applyJob(f, ns, 1)
	good := tfstatetest.State(sensitiveOutputValue, map[string]string{
		"endpoint": `{"host": "10.0.0.1", "port": 6443}`,
		"zones":    `["a", "b"]`,
		"html":     `"<a&b>"`,
	})
	writeState(f, ns, suffix, name, tfstatetest.Gzip(good))
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	got := waitOutputs(f, ns, c.Name, j, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	const wantOutputs = `{"endpoint":{"host":"10.0.0.1","port":6443},"html":"<a&b>","zones":["a","b"]}`
	var gotMap, wantMap map[string]any
	if err := json.Unmarshal(got.Status.Outputs.Raw, &gotMap); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(wantOutputs), &wantMap)
	if fmt.Sprint(gotMap) != fmt.Sprint(wantMap) {
		t.Errorf("T4: status.outputs %s, want %s", outputsJSON(got), wantOutputs)
	}
	if fmt.Sprint(got.Status.SensitiveOutputs) != "[admin_password]" {
		t.Errorf("T4: status.sensitiveOutputs %v", got.Status.SensitiveOutputs)
	}
	if got.Status.Initialization == nil || got.Status.Initialization.Provisioned == nil || !*got.Status.Initialization.Provisioned {
		t.Errorf("T5: initialization %+v", got.Status.Initialization)
	}
	lastGood := outputsJSON(got)

	// Each bad state after a new successful apply.
	bomb := func() []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zeros := make([]byte, 1<<20)
		for i := 0; i < 24; i++ {
			_, _ = w.Write(zeros)
		}
		_ = w.Close()
		return b.Bytes()
	}()
	steps := []struct {
		what   string
		data   []byte
		reason v1alpha1.ConditionReason
	}{
		{"not gzip", tfstatetest.State(sensitiveOutputValue, nil), v1alpha1.ReasonOutputsReadFailed},
		{"not JSON", tfstatetest.Gzip([]byte("admin_password = " + sensitiveOutputValue)), v1alpha1.ReasonOutputsReadFailed},
		{"encrypted", tfstatetest.Gzip([]byte(`{"meta":{"key_provider.pbkdf2.k":"e30="},"encrypted_data":"AAAA","encryption_version":"v0"}`)), v1alpha1.ReasonOutputsReadFailed},
		{"decompression bomb (24 MiB from " + strconv.Itoa(len(bomb)) + " bytes)", bomb, v1alpha1.ReasonOutputsReadFailed},
		{"outputs over 32 KiB", tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{"blob": `"` + strings.Repeat("b", 40<<10) + `"`})), v1alpha1.ReasonOutputsTooLarge},
		{"no state Secret", nil, v1alpha1.ReasonStateNotFound},
	}
	for i, step := range steps {
		gen := int64(i + 2)
		nextGeneration(f, ns, c.Name, i+2)
		j := applyJob(f, ns, gen)
		writeState(f, ns, suffix, name, step.data)
		if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
		got := waitOutputs(f, ns, c.Name, j, metav1.ConditionFalse, step.reason)
		cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionOutputsAvailable))
		t.Logf("%s: %s", step.what, cond.Message)
		if outputsJSON(got) != lastGood || fmt.Sprint(got.Status.SensitiveOutputs) != "[admin_password]" {
			t.Errorf("T4 %s: the last good outputs must stay: %s %v", step.what, outputsJSON(got), got.Status.SensitiveOutputs)
		}
		if !*got.Status.Initialization.Provisioned {
			t.Errorf("T5 %s: provisioned must stay true", step.what)
		}
	}

	// A good state again after the next apply.
	gen := int64(len(steps) + 2)
	nextGeneration(f, ns, c.Name, int(gen))
	j = applyJob(f, ns, gen)
	writeState(f, ns, suffix, name, tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{"id": `"net-2"`})))
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	got = waitOutputs(f, ns, c.Name, j, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	if outputsJSON(got) != `{"id":"net-2"}` {
		t.Errorf("T4: outputs after a good state again: %s", outputsJSON(got))
	}
}

// TestOutputsSplitState: a state HashiCorp Terraform split into 1 MiB
// parts (tfstate-default-<suffix>, -part-1, -part-2, every one with the
// backend's labels) is listed by those labels and reassembled. The API
// server accepts a part of exactly 1 MiB, so the split format is real.
func TestOutputsSplitState(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "outputs-split", "big")
	j := applyJob(f, ns, 1)

	pad := make([]byte, 0, 4<<20)
	for x := uint32(7); len(pad) < cap(pad); x = x*1664525 + 1013904223 {
		pad = append(pad, "abcdefghijklmnopqrstuvwxyz0123456789"[x>>24%36])
	}
	state := tfstatetest.State(sensitiveOutputValue, map[string]string{"id": `"big-1"`})
	state = append(state[:len(state)-1], []byte(`,"padding":"`+string(pad)+`"}`)...)
	compressed := tfstatetest.Gzip(state)
	if len(compressed) <= 2*tfstate.ChunkSize {
		t.Fatalf("the state must span three parts, its gzip is %d bytes", len(compressed))
	}
	for i := 0; len(compressed) > 0; i++ {
		n := min(tfstate.ChunkSize, len(compressed))
		writeState(f, ns, suffix, tfstate.PartName(suffix, i), compressed[:n])
		compressed = compressed[n:]
	}
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	got := waitOutputs(f, ns, c.Name, j, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	if outputsJSON(got) != `{"id":"big-1"}` || fmt.Sprint(got.Status.SensitiveOutputs) != "[admin_password]" {
		t.Errorf("T4 split state: outputs %s, sensitive %v", outputsJSON(got), got.Status.SensitiveOutputs)
	}
}

// updateJobStatus edits a Job's status as the Job controller would (there
// is no kubelet here), retrying on conflicts.
func updateJobStatus(f *framework.Fixture, ns, name string, edit func(j *batchv1.Job, now metav1.Time)) {
	f.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := f.Env.Kube.BatchV1().Jobs(ns).Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(j, metav1.Now())
		_, err = f.Env.Kube.BatchV1().Jobs(ns).UpdateStatus(f.Ctx, j, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// setPaused adds or removes cluster.x-k8s.io/paused and waits for a pass
// to report it: a pass that ran after the edit.
func setPaused(f *framework.Fixture, ns, name string, paused bool) {
	f.T.Helper()
	f.EditCluster(ns, name, func(c *v1alpha1.TerraformCluster) {
		if paused {
			c.Annotations[v1alpha1.AnnotationPaused] = ""
		} else {
			delete(c.Annotations, v1alpha1.AnnotationPaused)
		}
	})
	status, reason := metav1.ConditionFalse, v1alpha1.ReasonNotPaused
	if paused {
		status, reason = metav1.ConditionTrue, v1alpha1.ReasonPaused
	}
	f.WaitCondition(name, f.ClusterConds(ns, name), v1alpha1.ConditionPaused, status, reason)
}

// pausedCluster creates the TerraformCluster name using identity, paused
// (cluster.x-k8s.io/paused), and waits until it reports Paused=True and
// its credentials mirrored (T5: a paused object still gets its mirror).
func pausedCluster(f *framework.Fixture, ns, name, identity string) *v1alpha1.TerraformCluster {
	f.T.Helper()
	c := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{v1alpha1.AnnotationPaused: "", v1alpha1.AnnotationStandalone: "true"}},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: identity},
			Source:      v1alpha1.SourceSpec{Image: "example.com/module:1"},
		},
	}
	c, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	f.WaitCondition(name, f.ClusterConds(ns, name), v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	f.WaitCondition(name, f.ClusterConds(ns, name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	return c
}

// holdPod puts a finalizer of the test's on the pod of Job name, so that
// when the Job controller deletes it, it stays Terminating (as a pod does
// on a node while Terraform releases its state lock); the returned
// function lets it go.
func holdPod(f *framework.Fixture, ns, name string) (release func()) {
	f.T.Helper()
	const hold = "captf.test/hold"
	pods := f.Env.Kube.CoreV1().Pods(ns)
	var pod string
	f.WaitFor("the pod of Job "+name, func() (bool, string) {
		l, err := pods.List(f.Ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil || len(l.Items) == 0 {
			return false, fmt.Sprintf("pods %v, err %v", len(l.Items), err)
		}
		pod = l.Items[0].Name
		return true, ""
	})
	edit := func(add bool) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := pods.Get(f.Ctx, pod, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fs := slices.DeleteFunc(p.Finalizers, func(s string) bool { return s == hold })
			if add {
				fs = append(fs, hold)
			}
			p.Finalizers = fs
			_, err = pods.Update(f.Ctx, p, metav1.UpdateOptions{})
			return err
		})
	}
	if err := edit(true); err != nil {
		f.T.Fatal(err)
	}
	release = func() {
		if err := edit(false); err != nil && !apierrors.IsNotFound(err) {
			f.T.Error(err)
		}
	}
	f.T.Cleanup(release)
	return release
}

// TestOutputsWaitForTheRecord proves on the real API server, with the real
// Job controller, that T4 follows T7's record: a Job whose success
// criteria are met (SuccessCriteriaMet) while its pod is still terminating
// has no Complete condition yet, so it is not recorded, its state is not
// read and provisioned stays unset; once the pod is gone the Job
// controller completes the Job, the apply is recorded and the state read.
// The passes checked in between are the ones that report a pause and its
// removal, both requested after the Job's status changed. The real-node
// end-to-end test found this race (outputs read ahead of the record, then
// a second apply).
func TestOutputsWaitForTheRecord(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "outputs-record", "rec")
	j := applyJob(f, ns, 1)
	writeState(f, ns, suffix, tfstate.SecretName(suffix), tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{"id": `"rec-1"`})))
	release := holdPod(f, ns, j.Name)

	updateJobStatus(f, ns, j.Name, func(j *batchv1.Job, now metav1.Time) {
		j.Status.Succeeded = 1
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
			Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached",
			Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now,
		})
	})
	for _, paused := range []bool{true, false} {
		setPaused(f, ns, c.Name, paused)
		got := f.GetCluster(ns, c.Name)
		job, err := f.Env.Kube.BatchV1().Jobs(ns).Get(f.Ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if jobs.Finished(job) {
			t.Fatalf("premise: Job %s must not be finished while its pod is held: %+v", j.Name, job.Status.Conditions)
		}
		if got.Status.LastApply != nil || got.Status.Outputs != nil || got.Status.OutputsSource != nil || got.Status.Initialization != nil {
			t.Fatalf("T4, T7: before the Job is Complete nothing is recorded or read; lastApply %+v, outputs %s, outputsSource %+v, initialization %+v",
				got.Status.LastApply, outputsJSON(got), got.Status.OutputsSource, got.Status.Initialization)
		}
	}

	release()
	got := waitOutputs(f, ns, c.Name, j, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	if got.Status.LastApply == nil || got.Status.LastApply.JobName != j.Name || got.Status.LastApply.Outcome != v1alpha1.RunSucceeded {
		t.Errorf("T7: lastApply %+v, want %s Succeeded", got.Status.LastApply, j.Name)
	}
	if outputsJSON(got) != `{"id":"rec-1"}` || got.Status.Initialization == nil || !ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Errorf("T4, T5: outputs %s, initialization %+v", outputsJSON(got), got.Status.Initialization)
	}
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 1 {
		t.Errorf("J1: %d apply Jobs, want 1", n)
	}
}

// TestOutputsReadForARecordedJobThatIsGone: the read keys on T7's record,
// so an object whose status.lastApply records a successful apply whose Job
// no longer exists (pruned, a TTL, kubectl delete) before its state was
// read gets its outputs all the same, without a new Job; and the API
// server takes outputsSource without the deprecated jobCreationTimestamp
// (optional now: there is no Job to take it from).
func TestOutputsReadForARecordedJobThatIsGone(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "outputs-gone", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	// Paused, so no apply Job starts before the record is in place (T5).
	c := pausedCluster(f, ns, "gone", id)
	suffix := jobs.StateSuffix(v1alpha1.KindTerraformCluster, c.Name)
	writeState(f, ns, suffix, tfstate.SecretName(suffix), tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{"id": `"gone-1"`})))

	// The record of an apply whose Job is gone.
	gone := jobs.Name(v1alpha1.KindTerraformCluster, c.Name, c.UID, v1alpha1.JobActionApply, 1)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := f.GetCluster(ns, c.Name)
		got.Status.LastApply = &v1alpha1.RunRecord{Generation: got.Generation, JobName: gone, Outcome: v1alpha1.RunSucceeded,
			FinishTime: metav1.NewTime(time.Now().Add(-time.Minute).UTC().Truncate(time.Second)), Attempt: 1}
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).UpdateStatus(f.Ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	setPaused(f, ns, c.Name, false)

	got := waitOutputs(f, ns, c.Name, batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: gone}}, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	if outputsJSON(got) != `{"id":"gone-1"}` || got.Status.Initialization == nil || !ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Errorf("T4, T5: outputs %s, initialization %+v", outputsJSON(got), got.Status.Initialization)
	}
	if !got.Status.OutputsSource.JobCreationTimestamp.IsZero() {
		t.Errorf("outputsSource.jobCreationTimestamp %v: the Job is gone, it has none", got.Status.OutputsSource.JobCreationTimestamp)
	}
	if js := f.Jobs(ns, v1alpha1.JobActionApply); len(js) != 0 {
		t.Errorf("T7: the record covers the generation, yet apply Job %s started", js[0].Name)
	}
}

// stateUser creates a namespace named after prefix, an identity allowing
// it and a TerraformCluster name there using it, and returns them with the
// cluster's state suffix (T2).
func stateUser(t *testing.T, f *framework.Fixture, prefix, name string) (string, *v1alpha1.TerraformCluster, string) {
	t.Helper()
	ns := f.Env.CreateNamespace(t, prefix, nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := f.Cluster(ns, name, id)
	return ns, c, jobs.StateSuffix(v1alpha1.KindTerraformCluster, c.Name)
}
