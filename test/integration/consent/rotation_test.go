package consent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestRotationComplete covers C5: every Job records the hash it started
// with; RotationComplete goes False on rotation, stays False while a Job
// started before it still runs, and is True once that Job ends and every
// mirror is current.
func TestRotationComplete(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := consentedSource(f, "*", data)
	id := f.Identity(ref, framework.List(ns))
	f.Cluster(ns, "demo", id)
	job := f.WaitJob(ns, v1alpha1.JobActionApply)
	if got := job.Annotations[v1alpha1.AnnotationSourceHash]; got != framework.HashOf(data) {
		t.Fatalf("C5: the Job records hash %q, want the mirror's %q", got, framework.HashOf(data))
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete)

	rotated := framework.DefaultData(secretValue + "-rotated")
	f.SetSource(ref, rotated)
	f.WaitMirror(ns, id, "rotated", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	cond := f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionRotationComplete, metav1.ConditionFalse, v1alpha1.ReasonJobsOnPreviousCredentials)
	if want := ns + "/" + job.Name; !strings.Contains(cond.Message, want) {
		t.Errorf("C5: the message names the Job: %q", cond.Message)
	}
	// It stays False while the Job runs.
	time.Sleep(2 * syncPeriod)
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionRotationComplete, metav1.ConditionFalse, v1alpha1.ReasonJobsOnPreviousCredentials)
	i, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := i.Status.Rotation; r == nil || r.JobsOnPreviousCredentials != 1 || r.MirrorsCurrent != 1 || r.MirrorsStale != 0 {
		t.Errorf("C5: status.rotation %+v", r)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, job.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete)
}

// TestReapplyOnRotation covers C6: an object that opts in gets exactly one
// new apply Job per rotation, after the running one ends.
func TestReapplyOnRotation(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := consentedSource(f, "*", data)
	id := f.Identity(ref, framework.List(ns))
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}, Source: v1alpha1.SourceSpec{Image: "example.com/module:1"},
			Jobs: v1alpha1.JobsSpec{ReapplyOnRotation: true}}}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := f.WaitJob(ns, v1alpha1.JobActionApply)

	// Rotated while the first apply runs: nothing new until it ends.
	rotated := framework.DefaultData(secretValue + "-r1")
	f.SetSource(ref, rotated)
	f.WaitMirror(ns, id, "rotated", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	time.Sleep(2 * syncPeriod)
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 1 {
		t.Fatalf("C6: no re-apply while a Job runs, found %d apply Jobs", n)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, first.Name, ""); err != nil {
		t.Fatal(err)
	}
	var second batchv1.Job
	f.WaitFor("the re-apply Job", func() (bool, string) {
		js := f.Jobs(ns, v1alpha1.JobActionApply)
		for _, j := range js {
			if j.Name != first.Name {
				second = j
			}
		}
		return len(js) == 2, fmt.Sprintf("%d apply Jobs", len(js))
	})
	if second.Annotations[v1alpha1.AnnotationSourceHash] != framework.HashOf(rotated) {
		t.Errorf("C6: the re-apply Job must start with the new hash")
	}
	if err := f.Env.FinishJob(f.Ctx, ns, second.Name, ""); err != nil {
		t.Fatal(err)
	}
	// Exactly one per rotation: nothing more over several sync periods.
	time.Sleep(3 * syncPeriod)
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 2 {
		t.Fatalf("C6: want exactly 2 apply Jobs, found %d", n)
	}
}
