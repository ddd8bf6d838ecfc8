package trim

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// ForCache is the transform of every informer of the manager (SPEC B1,
// B12): it trims obj in place to what the manager reads of its kind and
// returns it. It is idempotent. A type it does not know loses only its
// managed fields ([Handles] says which it knows; the manager's tests check
// that every informer it starts holds one of those).
func ForCache(obj interface{}) (interface{}, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		// A tombstone holds a copy the transform already trimmed.
		return obj, nil
	case *v1alpha1.TerraformCluster:
		workload(&o.ObjectMeta, &o.Status)
	case *v1alpha1.TerraformMachine:
		workload(&o.ObjectMeta, &o.Status)
	case *v1alpha1.TerraformMachinePool:
		workload(&o.ObjectMeta, &o.Status)
	case *v1alpha1.TerraformClusterIdentity:
		Metadata(&o.ObjectMeta, Identity)
		internMeta(&o.ObjectMeta)
		internConditions(o.Status.Conditions)
	case *v1alpha1.TerraformPlan:
		Metadata(&o.ObjectMeta, Plan)
		internMeta(&o.ObjectMeta)
	case *corev1.Namespace:
		TrimNamespace(o)
		internMeta(&o.ObjectMeta)
	case *batchv1.Job:
		TrimJob(o)
		internMeta(&o.ObjectMeta)
	case *corev1.Secret:
		out, err := TrimMirror(o)
		internMeta(&o.ObjectMeta)
		return out, err
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// workload trims a TerraformCluster, TerraformMachine or
// TerraformMachinePool and interns the strings its kind repeats; its status
// stays whole (the manager writes it from this copy).
func workload(m *metav1.ObjectMeta, s *v1alpha1.WorkloadStatus) {
	Metadata(m, Workload)
	internMeta(m)
	InternStatus(s)
}

// InternStatus interns the strings of a workload status that many objects
// repeat (its conditions and identity), in place: the cache's copies, and
// the status the workload controller keeps of its last write per object.
func InternStatus(s *v1alpha1.WorkloadStatus) {
	internConditions(s.Conditions)
	s.Identity = Intern(s.Identity)
}

// Handles reports whether [ForCache] has a keep-list for obj's type.
func Handles(obj interface{}) bool {
	switch obj.(type) {
	case *v1alpha1.TerraformCluster, *v1alpha1.TerraformMachine, *v1alpha1.TerraformMachinePool,
		*v1alpha1.TerraformClusterIdentity, *v1alpha1.TerraformPlan, *corev1.Namespace, *batchv1.Job, *corev1.Secret:
		return true
	}
	return false
}

// Metadata drops the managed fields and the labels and annotations k does
// not keep. An empty result is nil, as the API server would return it.
func Metadata(m *metav1.ObjectMeta, k Keep) {
	m.ManagedFields = nil
	if !k.AllLabels {
		m.Labels = filter(m.Labels, k.Labels)
	}
	m.Annotations = filter(m.Annotations, k.Annotations)
}

// filter returns the entries of in whose key keep names, reusing in when it
// keeps them all (the common case for the manager's own objects).
func filter(in map[string]string, keep map[string]string) map[string]string {
	n := 0
	for key := range in {
		if _, ok := keep[key]; ok {
			n++
		}
	}
	switch {
	case n == 0:
		return nil
	case n == len(in):
		return in
	}
	out := make(map[string]string, n)
	for key, v := range in {
		if _, ok := keep[key]; ok {
			out[key] = v
		}
	}
	return out
}

// TrimNamespace keeps a Namespace's labels, deletion timestamp and phase
// (N4-N5, and whether it is terminating), nothing else of spec or status.
func TrimNamespace(n *corev1.Namespace) {
	Metadata(&n.ObjectMeta, Namespace)
	n.Spec = corev1.NamespaceSpec{}
	n.Status = corev1.NamespaceStatus{Phase: n.Status.Phase}
}

// jobConditions are the Job condition types jobs.Status and jobs.Finished
// read (J7, T7).
var jobConditions = map[batchv1.JobConditionType]bool{
	batchv1.JobComplete:           true,
	batchv1.JobSuccessCriteriaMet: true,
	batchv1.JobFailed:             true,
	batchv1.JobFailureTarget:      true,
}

// TrimJob keeps a Job's metadata as [Job] says, of its spec only suspend
// (K5: a Job created suspended still waits for its run Secret,
// workload suspendedRun; no pod template above all, B1), and of its status
// the conditions jobs.Status reads, the completion time jobs.FinishTime
// falls back on, the start time status.lastRun records (SPEC O1), and
// how many pods are ready (SPEC O2: a running Job none of whose pods is
// ready may wait for an image it cannot pull, workload pull.go).
func TrimJob(j *batchv1.Job) {
	Metadata(&j.ObjectMeta, Job)
	j.Spec = batchv1.JobSpec{Suspend: j.Spec.Suspend}
	var conds []batchv1.JobCondition
	for _, c := range j.Status.Conditions {
		if jobConditions[c.Type] {
			conds = append(conds, c)
		}
	}
	j.Status = batchv1.JobStatus{Conditions: conds, StartTime: j.Status.StartTime, CompletionTime: j.Status.CompletionTime, Ready: j.Status.Ready}
}

// TrimMirror keeps a Secret of the mirror informer as [Mirror] says, and
// its data as a hash ([credentials.TrimSecretForCache], B1).
func TrimMirror(s *corev1.Secret) (interface{}, error) {
	Metadata(&s.ObjectMeta, Mirror)
	return credentials.TrimSecretForCache(s)
}
