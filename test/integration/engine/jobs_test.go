package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework"
)

// TestApplyJob checks J1-J5 on the Job as the API server stores it, J7 from
// its outcome, and the finalizer of 1.2/J8.
func TestApplyJob(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := f.Cluster(ns, "demo", id)
	j := f.WaitJob(ns, v1alpha1.JobActionApply)

	// J1: label, controller owner, deterministic name of at most 63.
	if j.Labels[v1alpha1.LabelManaged] != "true" || len(j.Name) > 63 || j.Annotations[v1alpha1.AnnotationJobGeneration] != "1" {
		t.Errorf("J1: name %q labels %v annotations %v", j.Name, j.Labels, j.Annotations)
	}
	ctrl := metav1.GetControllerOf(&j)
	if ctrl == nil || ctrl.UID != c.UID || ctrl.BlockOwnerDeletion != nil {
		t.Errorf("J1/J3: controller reference %+v", ctrl)
	}
	// J4
	if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 || j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 3600 {
		t.Errorf("J4: backoffLimit %v activeDeadlineSeconds %v", j.Spec.BackoffLimit, j.Spec.ActiveDeadlineSeconds)
	}
	pod := j.Spec.Template.Spec
	mirror := credentials.MirrorName(id)
	// J2: envFrom and a read-only 0440 volume of the mirror.
	main := pod.Containers[0]
	if len(main.EnvFrom) != 1 || main.EnvFrom[0].SecretRef == nil || main.EnvFrom[0].SecretRef.Name != mirror {
		t.Errorf("J2: envFrom %+v", main.EnvFrom)
	}
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Secret != nil && pod.Volumes[i].Name == "credentials" {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil || vol.Secret.SecretName != mirror || vol.Secret.DefaultMode == nil || *vol.Secret.DefaultMode != 0o440 {
		t.Errorf("J2: credentials volume %+v", vol)
	}
	mounted := false
	for _, vm := range main.VolumeMounts {
		if vol != nil && vm.Name == vol.Name && vm.MountPath == "/var/run/captf/credentials" && vm.ReadOnly {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("J2: credentials not mounted read-only at /var/run/captf/credentials: %+v", main.VolumeMounts)
	}
	// J3: the three variables first.
	want := []corev1.EnvVar{{Name: "TF_IN_AUTOMATION", Value: "1"}, {Name: "TF_INPUT", Value: "0"}, {Name: "KUBE_NAMESPACE", Value: ns}}
	if len(main.Env) < 3 || fmt.Sprint(main.Env[:3]) != fmt.Sprint(want) {
		t.Errorf("J3: env %+v", main.Env)
	}
	// J5, T2, T8: the runner with its working copy, HOME and the default lock wait.
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != "ghcr.io/captf/captf:test" {
		t.Errorf("J5: init containers %+v", pod.InitContainers)
	}
	// K6: the contract inputs from the Job's run Secret.
	if main.Image != "example.com/module:1" || strings.Join(main.Command, " ") != "/opt/captf/bin/captf runner apply --workdir=/var/run/captf/work --home=/var/run/captf/home --lock-timeout=300s --state-namespace="+ns+" --state-suffix="+c.Name+"-cluster --result=/dev/termination-log --image=example.com/module:1 --inputs=/var/run/captf/inputs/inputs.json" {
		t.Errorf("J5: main container image %q command %v", main.Image, main.Command)
	}
	// O1: the result document is the container's termination message;
	// As the API server stored them.
	if main.TerminationMessagePath != "/dev/termination-log" || main.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Errorf("O1: termination message %q policy %q", main.TerminationMessagePath, main.TerminationMessagePolicy)
	}
	// O2: the API server accepted the pod failure policy as built.
	if fp := j.Spec.PodFailurePolicy; fp == nil || len(fp.Rules) != 2 || fp.Rules[1].OnExitCodes == nil || fmt.Sprint(fp.Rules[1].OnExitCodes.Values) != "[130 143]" {
		t.Errorf("O2: pod failure policy %+v; want DisruptionTarget and the exit codes 130 and 143 failing the Job", fp)
	}
	if cl := f.GetCluster(ns, c.Name); !framework.HasFinalizer(cl.Finalizers) {
		t.Errorf("the finalizer %s must be set once an apply Job exists: %v", v1alpha1.FinalizerDestroy, cl.Finalizers)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)

	// J7: the outcome, set as the Job controller would.
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)

	// A new generation gets a new apply Job; its failure is reported.
	f.EditCluster(ns, c.Name, func(cl *v1alpha1.TerraformCluster) { cl.Spec.Source.Image = "example.com/module:2" })
	var second batchv1.Job
	f.WaitFor("second apply Job", func() (bool, string) {
		for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if x.Annotations[v1alpha1.AnnotationJobGeneration] == "2" {
				second = x
				return true, ""
			}
		}
		return false, "not yet"
	})
	if err := f.Env.FinishJob(f.Ctx, ns, second.Name, "DeadlineExceeded"); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonJobDeadlineExceeded)
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 2 {
		t.Errorf("J1: want exactly 2 apply Jobs, got %d", n)
	}
}

// TestDeletionFlow checks J8 and V3: with the finalizer, deletion refreshes
// the mirror, creates one destroy Job; on success the mirror loses this
// owner and, being the last, is deleted; the finalizer goes last.
func TestDeletionFlow(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(ns))
	a := f.Cluster(ns, "a", id)
	b := f.Cluster(ns, "b", id)
	for _, name := range []string{a.Name, b.Name} {
		f.WaitCondition("cluster "+name, f.ClusterConds(ns, name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	}
	for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitCondition("cluster a", f.ClusterConds(ns, a.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// Rotate just before deleting: M6 says the destroy gets current credentials.
	rotated := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAFORDESTROY", "AWS_SECRET_ACCESS_KEY": secretValue + "-d"}
	f.SetSource(ref, rotated)
	if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.Ctx, a.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var destroy batchv1.Job
	f.WaitFor("destroy Job of a", func() (bool, string) {
		n := 0
		for _, j := range f.Jobs(ns, v1alpha1.JobActionDestroy) {
			if metav1.GetControllerOf(&j).UID == a.UID {
				destroy = j
				n++
			}
		}
		// J8: exactly one destroy Job per deletion.
		return n == 1, fmt.Sprintf("%d destroy Jobs", n)
	})
	if m := f.Mirror(ns, id); m.Annotations[v1alpha1.AnnotationSourceHash] != framework.HashOf(rotated) {
		t.Errorf("M6/J8: the mirror must be current when the destroy Job is created")
	}
	if destroy.Annotations[v1alpha1.AnnotationSourceHash] != framework.HashOf(rotated) {
		t.Errorf("the destroy Job must start with the current hash, got %q", destroy.Annotations[v1alpha1.AnnotationSourceHash])
	}
	if got := strings.Join(destroy.Spec.Template.Spec.Containers[0].Command, " "); !strings.HasPrefix(got, "/opt/captf/bin/captf runner destroy --workdir=/var/run/captf/work --home=/var/run/captf/home --lock-timeout=300s --state-namespace="+ns+" --state-suffix=") {
		t.Errorf("J5: destroy command %q", got)
	}
	f.WaitCondition("cluster a", f.ClusterConds(ns, a.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	if err := f.Env.FinishJob(f.Ctx, ns, destroy.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("cluster a gone", func() (bool, string) {
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, a.Name, metav1.GetOptions{})
		return err != nil, "still there"
	})
	// b still uses the mirror: only a's reference is gone.
	m := f.WaitMirror(ns, id, "a's reference removed", func(m *corev1.Secret) bool {
		return !credentials.HasOwnerReference(m.OwnerReferences, a.UID)
	})
	if !credentials.HasOwnerReference(m.OwnerReferences, b.UID) {
		t.Fatalf("V3: b's reference must stay: %v", framework.OwnerNames(m))
	}

	// b is the last owner: its cleanup deletes the mirror.
	if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.Ctx, b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var destroyB batchv1.Job
	f.WaitFor("destroy Job of b", func() (bool, string) {
		for _, j := range f.Jobs(ns, v1alpha1.JobActionDestroy) {
			if metav1.GetControllerOf(&j).UID == b.UID {
				destroyB = j
				return true, ""
			}
		}
		return false, "none"
	})
	if f.Mirror(ns, id) == nil {
		t.Fatal("V3: the mirror must not be deleted before the last destroy succeeds")
	}
	if err := f.Env.FinishJob(f.Ctx, ns, destroyB.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitNoMirror(ns, id)
	f.WaitIdentityNamespaces(id, nil)
}

// TestDestroyWaitsForIdentity checks V2: a destroy whose identity no longer
// allows the namespace waits with IdentityNotAllowed and resumes once the
// namespace is allowed again; the abandon annotation releases another.
func TestDestroyWaitsForIdentity(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	a := f.Cluster(ns, "a", id)
	b := f.Cluster(ns, "b", id)
	for _, name := range []string{a.Name, b.Name} {
		f.WaitCondition("cluster "+name, f.ClusterConds(ns, name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	}
	for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitCondition("cluster a", f.ClusterConds(ns, a.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	f.WaitCondition("cluster b", f.ClusterConds(ns, b.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List("elsewhere") })
	f.WaitNoMirror(ns, id)
	for _, c := range []*v1alpha1.TerraformCluster{a, b} {
		if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.Ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cond := f.WaitCondition("cluster a", f.ClusterConds(ns, a.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed)
	if !strings.Contains(cond.Message, v1alpha1.AnnotationAbandonInfrastructure) {
		t.Errorf("V2: the message must say how to abandon: %q", cond.Message)
	}
	time.Sleep(2 * syncPeriod)
	if n := len(f.Jobs(ns, v1alpha1.JobActionDestroy)); n != 0 {
		t.Fatalf("V2: no destroy Job while the identity does not allow the namespace, found %d", n)
	}
	if !framework.HasFinalizer(f.GetCluster(ns, a.Name).Finalizers) {
		t.Fatal("V2: the finalizer must stay while the destroy waits")
	}

	// Abandon b: finalizer removed without a destroy.
	f.EditCluster(ns, b.Name, func(cb *v1alpha1.TerraformCluster) {
		cb.Annotations[v1alpha1.AnnotationAbandonInfrastructure] = string(cb.UID)
	})
	f.WaitFor("cluster b gone", func() (bool, string) {
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, b.Name, metav1.GetOptions{})
		return err != nil, "still there"
	})
	ev, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventInfrastructureAbandoned})
	if err != nil || len(ev.Items) == 0 {
		t.Errorf("V2: want an InfrastructureAbandoned event, got %v %v", ev, err)
	}

	// Allow again: a's destroy proceeds.
	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(ns) })
	d := f.WaitJob(ns, v1alpha1.JobActionDestroy)
	if err := f.Env.FinishJob(f.Ctx, ns, d.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("cluster a gone", func() (bool, string) {
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, a.Name, metav1.GetOptions{})
		return err != nil, "still there"
	})
	f.WaitNoMirror(ns, id)
}

// TestNamespaceDeletion checks that deleting a namespace removes its mirror
// (the namespace controller) and the manager copes: objects without a Job
// go with the namespace, and the identity's status forgets it.
func TestNamespaceDeletion(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "doomed", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-image", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}}}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })
	f.WaitIdentityNamespaces(id, []string{ns})
	if err := f.Env.Kube.CoreV1().Namespaces().Delete(f.Ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("namespace gone", func() (bool, string) {
		_, err := f.Env.Kube.CoreV1().Namespaces().Get(f.Ctx, ns, metav1.GetOptions{})
		return err != nil, "still terminating"
	})
	f.WaitIdentityNamespaces(id, nil)
	if !f.Manager.Exited() && strings.Count(f.Manager.Log(), "panic") > 0 {
		t.Fatalf("the manager panicked")
	}
}
