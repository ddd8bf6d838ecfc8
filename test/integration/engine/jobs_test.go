package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework"
)

func join(s []string) string { return "[" + strings.Join(s, " ") + "]" }

func waitFor(f *fixture, what string, cond func() (bool, string)) {
	f.t.Helper()
	framework.Eventually(f.t, settle, func() (bool, string) {
		ok, msg := cond()
		return ok, what + ": " + msg
	})
}

// jobs lists the Jobs of namespace with action.
func (f *fixture) jobs(ns string, action v1.JobAction) []batchv1.Job {
	f.t.Helper()
	l, err := f.e.Kube.BatchV1().Jobs(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range l.Items {
		if j.Annotations[v1.AnnotationJobAction] == string(action) {
			out = append(out, j)
		}
	}
	return out
}

func (f *fixture) waitJob(ns string, action v1.JobAction) batchv1.Job {
	f.t.Helper()
	var j batchv1.Job
	waitFor(f, string(action)+" Job", func() (bool, string) {
		js := f.jobs(ns, action)
		if len(js) == 0 {
			return false, "none yet"
		}
		j = js[0]
		return len(js) == 1, fmt.Sprintf("%d Jobs", len(js))
	})
	return j
}

// TestApplyJob checks J1-J5 on the Job as the API server stores it, J7 from
// its outcome, and the finalizer of 1.2/J8.
func TestApplyJob(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "tenant", nil)
	id := f.identity(f.source(defaultData()), list(ns))
	c := f.cluster(ns, "demo", id)
	j := f.waitJob(ns, v1.JobActionApply)

	// J1: label, controller owner, deterministic name of at most 63.
	if j.Labels[v1.LabelManaged] != "true" || len(j.Name) > 63 || j.Annotations[v1.AnnotationJobGeneration] != "1" {
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
		if pod.Volumes[i].Secret != nil {
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
	// J5
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != "ghcr.io/captf/captf:test" {
		t.Errorf("J5: init containers %+v", pod.InitContainers)
	}
	if main.Image != "example.com/module:1" || strings.Join(main.Command, " ") != "/opt/captf/bin/captf runner apply" {
		t.Errorf("J5: main container image %q command %v", main.Image, main.Command)
	}
	if cl := f.getCluster(ns, c.Name); !hasFinalizer(cl.Finalizers) {
		t.Errorf("the finalizer %s must be set once an apply Job exists: %v", v1.FinalizerDestroy, cl.Finalizers)
	}
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1.ReasonJobRunning)

	// J7: the outcome, set as the Job controller would.
	if err := f.e.FinishJob(f.ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1.ReasonApplySucceeded)
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionReady, metav1.ConditionTrue, v1.ReasonReady)

	// A new generation gets a new apply Job; its failure is reported.
	cl := f.getCluster(ns, c.Name)
	cl.Spec.Source.Image = "example.com/module:2"
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Update(f.ctx, cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var second batchv1.Job
	waitFor(f, "second apply Job", func() (bool, string) {
		for _, x := range f.jobs(ns, v1.JobActionApply) {
			if x.Annotations[v1.AnnotationJobGeneration] == "2" {
				second = x
				return true, ""
			}
		}
		return false, "not yet"
	})
	if err := f.e.FinishJob(f.ctx, ns, second.Name, "DeadlineExceeded"); err != nil {
		t.Fatal(err)
	}
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1.ReasonJobDeadlineExceeded)
	if n := len(f.jobs(ns, v1.JobActionApply)); n != 2 {
		t.Errorf("J1: want exactly 2 apply Jobs, got %d", n)
	}
}

func hasFinalizer(fs []string) bool {
	for _, x := range fs {
		if x == v1.FinalizerDestroy {
			return true
		}
	}
	return false
}

// TestDeletionFlow checks J8 and V3: with the finalizer, deletion refreshes
// the mirror, creates one destroy Job; on success the mirror loses this
// owner and, being the last, is deleted; the finalizer goes last.
func TestDeletionFlow(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "tenant", nil)
	data := defaultData()
	ref := f.source(data)
	id := f.identity(ref, list(ns))
	a := f.cluster(ns, "a", id)
	b := f.cluster(ns, "b", id)
	for _, name := range []string{a.Name, b.Name} {
		f.waitCondition("cluster "+name, f.clusterConds(ns, name), v1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1.ReasonJobRunning)
	}
	for _, j := range f.jobs(ns, v1.JobActionApply) {
		if err := f.e.FinishJob(f.ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCondition("cluster a", f.clusterConds(ns, a.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1.ReasonApplySucceeded)

	// Rotate just before deleting: M6 says the destroy gets current credentials.
	rotated := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAFORDESTROY", "AWS_SECRET_ACCESS_KEY": secretValue + "-d"}
	f.setSource(ref, rotated)
	if err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.ctx, a.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var destroy batchv1.Job
	waitFor(f, "destroy Job of a", func() (bool, string) {
		n := 0
		for _, j := range f.jobs(ns, v1.JobActionDestroy) {
			if metav1.GetControllerOf(&j).UID == a.UID {
				destroy = j
				n++
			}
		}
		// J8: exactly one destroy Job per deletion.
		return n == 1, fmt.Sprintf("%d destroy Jobs", n)
	})
	if m := f.mirror(ns, id); m.Annotations[v1.AnnotationSourceHash] != hashOf(rotated) {
		t.Errorf("M6/J8: the mirror must be current when the destroy Job is created")
	}
	if destroy.Annotations[v1.AnnotationSourceHash] != hashOf(rotated) {
		t.Errorf("the destroy Job must start with the current hash, got %q", destroy.Annotations[v1.AnnotationSourceHash])
	}
	if got := strings.Join(destroy.Spec.Template.Spec.Containers[0].Command, " "); got != "/opt/captf/bin/captf runner destroy" {
		t.Errorf("J5: destroy command %q", got)
	}
	f.waitCondition("cluster a", f.clusterConds(ns, a.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1.ReasonJobRunning)
	if err := f.e.FinishJob(f.ctx, ns, destroy.Name, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(f, "cluster a gone", func() (bool, string) {
		_, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.ctx, a.Name, metav1.GetOptions{})
		return err != nil, "still there"
	})
	// b still uses the mirror: only a's reference is gone.
	m := f.waitMirror(ns, id, "a's reference removed", func(m *corev1.Secret) bool {
		return !credentials.HasOwnerReference(m.OwnerReferences, a.UID)
	})
	if !credentials.HasOwnerReference(m.OwnerReferences, b.UID) {
		t.Fatalf("V3: b's reference must stay: %v", ownerNames(m))
	}

	// b is the last owner: its cleanup deletes the mirror.
	if err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.ctx, b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var destroyB batchv1.Job
	waitFor(f, "destroy Job of b", func() (bool, string) {
		for _, j := range f.jobs(ns, v1.JobActionDestroy) {
			if metav1.GetControllerOf(&j).UID == b.UID {
				destroyB = j
				return true, ""
			}
		}
		return false, "none"
	})
	if f.mirror(ns, id) == nil {
		t.Fatal("V3: the mirror must not be deleted before the last destroy succeeds")
	}
	if err := f.e.FinishJob(f.ctx, ns, destroyB.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.waitNoMirror(ns, id)
	f.waitIdentityNamespaces(id, nil)
}

// TestDestroyWaitsForIdentity checks V2: a destroy whose identity no longer
// allows the namespace waits with IdentityNotAllowed and resumes once the
// namespace is allowed again; the abandon annotation releases another.
func TestDestroyWaitsForIdentity(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "tenant", nil)
	id := f.identity(f.source(defaultData()), list(ns))
	a := f.cluster(ns, "a", id)
	b := f.cluster(ns, "b", id)
	for _, name := range []string{a.Name, b.Name} {
		f.waitCondition("cluster "+name, f.clusterConds(ns, name), v1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1.ReasonJobRunning)
	}
	for _, j := range f.jobs(ns, v1.JobActionApply) {
		if err := f.e.FinishJob(f.ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCondition("cluster a", f.clusterConds(ns, a.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1.ReasonApplySucceeded)
	f.waitCondition("cluster b", f.clusterConds(ns, b.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1.ReasonApplySucceeded)

	f.editIdentity(id, func(i *v1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = list("elsewhere") })
	f.waitNoMirror(ns, id)
	for _, c := range []*v1.TerraformCluster{a, b} {
		if err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cond := f.waitCondition("cluster a", f.clusterConds(ns, a.Name), v1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1.ReasonIdentityNotAllowed)
	if !strings.Contains(cond.Message, v1.AnnotationAbandonInfrastructure) {
		t.Errorf("V2: the message must say how to abandon: %q", cond.Message)
	}
	time.Sleep(2 * syncPeriod)
	if n := len(f.jobs(ns, v1.JobActionDestroy)); n != 0 {
		t.Fatalf("V2: no destroy Job while the identity does not allow the namespace, found %d", n)
	}
	if !hasFinalizer(f.getCluster(ns, a.Name).Finalizers) {
		t.Fatal("V2: the finalizer must stay while the destroy waits")
	}

	// Abandon b: finalizer removed without a destroy.
	cb := f.getCluster(ns, b.Name)
	if cb.Annotations == nil {
		cb.Annotations = map[string]string{}
	}
	cb.Annotations[v1.AnnotationAbandonInfrastructure] = string(cb.UID)
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Update(f.ctx, cb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(f, "cluster b gone", func() (bool, string) {
		_, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.ctx, b.Name, metav1.GetOptions{})
		return err != nil, "still there"
	})
	ev, err := f.e.Kube.CoreV1().Events(ns).List(f.ctx, metav1.ListOptions{FieldSelector: "reason=" + v1.EventInfrastructureAbandoned})
	if err != nil || len(ev.Items) == 0 {
		t.Errorf("V2: want an InfrastructureAbandoned event, got %v %v", ev, err)
	}

	// Allow again: a's destroy proceeds.
	f.editIdentity(id, func(i *v1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = list(ns) })
	d := f.waitJob(ns, v1.JobActionDestroy)
	if err := f.e.FinishJob(f.ctx, ns, d.Name, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(f, "cluster a gone", func() (bool, string) {
		_, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.ctx, a.Name, metav1.GetOptions{})
		return err != nil, "still there"
	})
	f.waitNoMirror(ns, id)
}

// TestNamespaceDeletion checks that deleting a namespace removes its mirror
// (the namespace controller) and the manager copes: objects without a Job
// go with the namespace, and the identity's status forgets it.
func TestNamespaceDeletion(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "doomed", nil)
	id := f.identity(f.source(defaultData()), list(ns))
	c := &v1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-image"},
		Spec: v1.TerraformClusterSpec{IdentityRef: &v1.IdentityReference{Name: id}}}
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })
	f.waitIdentityNamespaces(id, []string{ns})
	if err := f.e.Kube.CoreV1().Namespaces().Delete(f.ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(f, "namespace gone", func() (bool, string) {
		_, err := f.e.Kube.CoreV1().Namespaces().Get(f.ctx, ns, metav1.GetOptions{})
		return err != nil, "still terminating"
	})
	f.waitIdentityNamespaces(id, nil)
	if !f.m.Exited() && strings.Count(f.m.Log(), "panic") > 0 {
		t.Fatalf("the manager panicked")
	}
}
