package engine

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/test/integration/framework"
)

// TestDigestPinningO6 proves SPEC O6 on the API server with the real Job
// controller: the pod of a machine's successful apply reports the image's
// digest (its imageID, written here as the kubelet would); the manager
// records it in status.source, and the machine's destroy Job runs
// repository@digest, not the tag.
func TestDigestPinningO6(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	const image = "example.com/module:1"
	digest := "sha256:" + strings.Repeat("5e", 32)
	m, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(f.Ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "o6", Annotations: framework.Standalone()},
		Spec:       v1alpha1.TerraformMachineSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}, Source: v1alpha1.SourceSpec{Image: image}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apply := f.WaitJob(ns, v1alpha1.JobActionApply)
	if got := containerImage(apply); got != image {
		t.Fatalf("O6: the first apply runs the spec's image, got %s", got)
	}
	doc, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationApply, Image: image,
		Steps: []runresult.Step{{Name: "init"}, {Name: "apply"}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	endPod(f, ns, apply, 0, string(doc), "example.com/module@"+digest)
	machines := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns)
	f.WaitFor("status.source", func() (bool, string) {
		got, err := machines.Get(f.Ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s := got.Status.Source
		return s != nil && s.Image == image && s.ImageDigest == digest, "lastRun " + fmtRun(got.Status.LastRun)
	})

	if err := machines.Delete(f.Ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	destroy := f.WaitJob(ns, v1alpha1.JobActionDestroy)
	if got, want := containerImage(destroy), "example.com/module@"+digest; got != want {
		t.Fatalf("O6: the machine's destroy runs %s, want %s", got, want)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, destroy.Name, ""); err != nil {
		t.Fatal(err)
	}
}

// containerImage is the image of a Job's Terraform container.
func containerImage(j batchv1.Job) string {
	for _, c := range j.Spec.Template.Spec.Containers {
		if c.Name == jobs.ContainerName {
			return c.Image
		}
	}
	return ""
}

func fmtRun(l *v1alpha1.LastRun) string {
	if l == nil {
		return "none"
	}
	return l.Job + " " + string(l.Outcome)
}
