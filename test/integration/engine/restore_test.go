package engine

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// annotateRestore sets captf.io/restore-state on cluster ns/name.
func annotateRestore(f *framework.Fixture, ns, name, value string) {
	f.T.Helper()
	f.EditCluster(ns, name, func(c *v1alpha1.TerraformCluster) {
		c.Annotations[v1alpha1.AnnotationRestoreState] = value
	})
}

// restoreCondition waits for RestoreJobSucceeded with status and reason.
func restoreCondition(f *framework.Fixture, ns, name string, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) *v1alpha1.TerraformCluster {
	f.T.Helper()
	var c *v1alpha1.TerraformCluster
	f.WaitFor("RestoreJobSucceeded "+string(reason), func() (bool, string) {
		c = f.GetCluster(ns, name)
		cond := meta.FindStatusCondition(c.Status.Conditions, string(v1alpha1.ConditionRestoreJobSucceeded))
		return cond != nil && cond.Status == status && cond.Reason == string(reason), framework.Describe(c.Status.Conditions)
	})
	return c
}

// restoreJobsStay checks that, over several sync periods (a deadline, not
// a measured duration), ns holds exactly want restore Jobs.
func restoreJobsStay(f *framework.Fixture, ns string, want int, why string) {
	f.T.Helper()
	time.Sleep(3 * syncPeriod)
	if js := f.Jobs(ns, v1alpha1.JobActionRestore); len(js) != want {
		f.T.Fatalf("O5: %s: %d restore Jobs, want %d", why, len(js), want)
	}
}

// restoresMetric waits until the manager serves
// captf_state_restores_total{result} at least min: a lower bound, since
// the manager is shared by the package's tests (counting each once is
// the unit tests').
func restoresMetric(f *framework.Fixture, result string, min float64) {
	f.T.Helper()
	f.WaitFor("captf_state_restores_total{result="+result+"}", func() (bool, string) {
		m, err := f.Manager.Scrape()
		if err != nil {
			return false, err.Error()
		}
		for _, s := range m {
			if s.Name == "captf_state_restores_total" && s.Labels["result"] == result {
				return s.Value >= min, fmt.Sprintf("%v", s.Value)
			}
		}
		return false, "not served"
	})
}

// TestO5RestoreRefused: a serial that is not among the kept backups is
// refused (RestoreJobSucceeded False/RestoreBackupNotFound and a
// StateRestoreFailed event naming the kept serials) and no restore Job is
// created, on that pass or later ones.
func TestO5RestoreRefused(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "restorebad", "r")
	applySerial(f, ns, c.Name, suffix, 1, serialState(1))
	f.WaitFor("the backup of serial 1", func() (bool, string) {
		got := f.GetCluster(ns, c.Name)
		return len(got.Status.StateBackups) == 1, fmt.Sprintf("%v", backupSerials(got))
	})
	annotateRestore(f, ns, c.Name, "7")
	got := restoreCondition(f, ns, c.Name, metav1.ConditionFalse, v1alpha1.ReasonRestoreBackupNotFound)
	if got.Status.ObservedRestore != "7" || got.Status.LastRestoredSerial != nil {
		t.Fatalf("O5: a refused value is acted on without a Job: observedRestore %q, lastRestoredSerial %v", got.Status.ObservedRestore, got.Status.LastRestoredSerial)
	}
	evs, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventStateRestoreFailed})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "serial 7") || !strings.Contains(evs.Items[0].Message, "[1]") {
		t.Fatalf("O5: want one StateRestoreFailed event naming serial 7 and the kept [1], got %+v", evs.Items)
	}
	restoreJobsStay(f, ns, 0, "a refused serial")
	restoresMetric(f, "refused", 1)
}

// TestO5RestoreBringsBackSerial proves SPEC O5's restore on the real API
// server with the real runner and OpenTofu's kubernetes backend: applies
// of serials 1 and 2 leave backups of both; captf.io/restore-state=1
// creates exactly one restore Job, whose pod would mount the backup of
// serial 1 (the Secrets it names, emulated here as the kubelet would
// project them); `captf runner restore` pushes it, so the state Secret
// holds serial 1's outputs again (under a new serial); the manager records
// the restore (status.lastRestore, RestoreJobSucceeded True/StateRestored,
// a StateRestored event naming serial 1) and starts no apply; and no
// second restore Job starts on resyncs, nor once the finished Job is gone
// (the decision then rests on status.observedRestore alone, what a
// restarted manager reads).
func TestO5RestoreBringsBackSerial(t *testing.T) {
	tofu := filepath.Join(repoRoot(t), "bin", "tofu")
	if _, err := os.Stat(tofu); err != nil {
		t.Skip("bin/tofu is missing: build it with `make tofu`; the restore pushes with OpenTofu")
	}
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "restore", "r")
	applySerial(f, ns, c.Name, suffix, 1, serialState(1))
	applySerial(f, ns, c.Name, suffix, 2, serialState(2))
	f.WaitFor("backups of serials 2 and 1", func() (bool, string) {
		got := f.GetCluster(ns, c.Name)
		return fmt.Sprint(backupSerials(got)) == "[2 1]", fmt.Sprintf("%v", backupSerials(got))
	})
	if got := stateOutput(f, ns, suffix, "serial"); got != "2" {
		t.Fatalf("before the restore the state's output serial is %s, want 2", got)
	}

	annotateRestore(f, ns, c.Name, "1")
	j := f.WaitJob(ns, v1alpha1.JobActionRestore)
	if j.Annotations[v1alpha1.AnnotationJobRestoreSerial] != "1" {
		t.Fatalf("O5: the restore Job is for serial %q, want 1", j.Annotations[v1alpha1.AnnotationJobRestoreSerial])
	}
	runRestoreJob(f, tofu, j, suffix)
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	got := restoreCondition(f, ns, c.Name, metav1.ConditionTrue, v1alpha1.ReasonStateRestored)
	if got.Status.LastRestore == nil || got.Status.LastRestore.JobName != j.Name || got.Status.ObservedRestore != "1" ||
		got.Status.LastRestoredSerial == nil || *got.Status.LastRestoredSerial != 1 {
		t.Fatalf("O5: status after the restore: lastRestore %+v, observedRestore %q, lastRestoredSerial %v", got.Status.LastRestore, got.Status.ObservedRestore, got.Status.LastRestoredSerial)
	}
	if out := stateOutput(f, ns, suffix, "serial"); out != "1" {
		t.Fatalf("O5: after restoring serial 1 the state's output serial is %s, want 1", out)
	}
	evs, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventStateRestored})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "serial 1") {
		t.Fatalf("O5: want one StateRestored event naming serial 1, got %+v", evs.Items)
	}

	restoresMetric(f, "succeeded", 1)
	restoreJobsStay(f, ns, 1, "resyncs after the restore")
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 2 {
		t.Fatalf("O5: a restore starts no apply by itself: %d apply Jobs, want 2", n)
	}
	// The finished Job gone: status.observedRestore alone holds it.
	if err := f.Env.Kube.BatchV1().Jobs(ns).Delete(f.Ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the restore Job gone", func() (bool, string) {
		n := len(f.Jobs(ns, v1alpha1.JobActionRestore))
		return n == 0, fmt.Sprintf("%d restore Jobs", n)
	})
	restoreJobsStay(f, ns, 0, "the same annotation value once its Job is gone")
}

func ptrTo[T any](v T) *T { return &v }

// repoRoot is the repository root.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// runRestoreJob runs Job j's `captf runner restore` in process, out of
// cluster, as its pod would: the chunks are the data of the Secrets its
// restore volume projects, in order (what the kubelet mounts), and the
// state is in the kubernetes backend of the test's API server.
func runRestoreJob(f *framework.Fixture, tofu string, j batchv1.Job, suffix string) {
	f.T.Helper()
	chunks := f.T.TempDir()
	var vol int
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Name != jobs.RestoreVolumeName || v.Projected == nil {
			continue
		}
		for i, src := range v.Projected.Sources {
			s, err := f.Env.Kube.CoreV1().Secrets(j.Namespace).Get(f.Ctx, src.Secret.Name, metav1.GetOptions{})
			if err != nil {
				f.T.Fatal(err)
			}
			if src.Secret.Items[0].Path != strconv.Itoa(i) {
				f.T.Fatalf("O5: part %d of the backup is mounted as %q", i, src.Secret.Items[0].Path)
			}
			if err := os.WriteFile(filepath.Join(chunks, strconv.Itoa(i)), s.Data[src.Secret.Items[0].Key], 0o600); err != nil {
				f.T.Fatal(err)
			}
			vol++
		}
	}
	if vol == 0 {
		f.T.Fatalf("O5: restore Job %s mounts no backup", j.Name)
	}
	module := f.T.TempDir()
	if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte("output \"noop\" {\n  value = 1\n}\n"), 0o644); err != nil {
		f.T.Fatal(err)
	}
	args := []string{"restore", "--terraform=" + tofu, "--chdir=" + module, "--workdir=" + f.T.TempDir(),
		"--home=" + filepath.Join(f.T.TempDir(), "home"), "--lock-timeout=30s",
		"--state-namespace=" + j.Namespace, "--state-suffix=" + suffix,
		"--state-kubeconfig=" + f.Env.CP.KubeconfigPath(controlplane.Admin),
		"--restore-chunks=" + chunks}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(f.Ctx, 2*time.Minute)
	defer cancel()
	code := runner.Main(ctx, args, []string{"PATH=/usr/bin:/bin"}, &out, &out)
	if code != 0 {
		f.T.Fatalf("captf runner restore exited %d:\n%s", code, out.String())
	}
	f.T.Logf("captf runner restore:\n%s", out.String())
}

// stateOutput returns the value of output name in the state Secret
// of suffix, and logs the state's serial.
func stateOutput(f *framework.Fixture, ns, suffix, name string) string {
	f.T.Helper()
	s, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, tfstate.SecretName(suffix), metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(s.Data[tfstate.DataKey]))
	if err != nil {
		f.T.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		f.T.Fatal(err)
	}
	var st struct {
		Serial  int64                                      `json:"serial"`
		Outputs map[string]struct{ Value json.RawMessage } `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		f.T.Fatal(err)
	}
	f.T.Logf("state serial %d", st.Serial)
	var v any // a string or a number: OpenTofu writes the value as its type says
	if err := json.Unmarshal(st.Outputs[name].Value, &v); err != nil {
		f.T.Fatal(err)
	}
	return fmt.Sprint(v)
}
