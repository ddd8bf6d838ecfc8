package trust

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// cluster creates a TerraformCluster using identity; it starts Jobs when
// image is set.
func cluster(f *framework.Fixture, ns, name, identity, image string) faultkit.Workload {
	f.T.Helper()
	w, err := faultkit.CreateWorkload(f.Ctx, f.Env.Captf, faultkit.KindCluster, ns, name, identity, image, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	return w
}

// conds returns a getter of a workload object's conditions for WaitCondition.
func conds(f *framework.Fixture, w faultkit.Workload) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		s, err := faultkit.GetWorkload(f.Ctx, f.Env.Captf, w)
		if err == nil && !s.Exists {
			err = fmt.Errorf("%s does not exist", w)
		}
		return s.Conditions, err
	}
}

// identity reads an identity, failing the test.
func identity(f *framework.Fixture, name string) *v1alpha1.TerraformClusterIdentity {
	f.T.Helper()
	i, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return i
}

// describeStatus formats what an identity's status says, for reports.
func describeStatus(i *v1alpha1.TerraformClusterIdentity) string {
	s := fmt.Sprintf("namespaces %v; ", i.Status.Namespaces)
	if m := i.Status.Mirrors; m != nil {
		s += fmt.Sprintf("mirrors %+v; ", *m)
	} else {
		s += "mirrors nil; "
	}
	if r := i.Status.Rotation; r != nil {
		s += fmt.Sprintf("rotation %+v; ", *r)
	} else {
		s += "rotation nil; "
	}
	return s + framework.Describe(i.Status.Conditions)
}

// condTrue reports whether an identity's condition t is True.
func condTrue(i *v1alpha1.TerraformClusterIdentity, t v1alpha1.ConditionType) bool {
	return meta.IsStatusConditionTrue(i.Status.Conditions, string(t))
}

// waitIdentity polls the identity until ok holds.
func waitIdentity(f *framework.Fixture, name, what string, ok func(*v1alpha1.TerraformClusterIdentity) bool) *v1alpha1.TerraformClusterIdentity {
	f.T.Helper()
	var i *v1alpha1.TerraformClusterIdentity
	f.WaitFor(what, func() (bool, string) {
		i = identity(f, name)
		return ok(i), describeStatus(i)
	})
	return i
}

// holds polls the identity for window and fails the test the first time
// ok does not hold: an observation that a forged object changes nothing
// over several resyncs, never a bound on how long anything takes.
func holds(f *framework.Fixture, name, what string, window time.Duration, ok func(*v1alpha1.TerraformClusterIdentity) bool) {
	f.T.Helper()
	holdsCond(f, what, window, func() (bool, string) {
		i := identity(f, name)
		return ok(i), describeStatus(i)
	})
}

// holdsCond polls cond for window and fails the test the first time it
// does not hold.
func holdsCond(f *framework.Fixture, what string, window time.Duration, cond func() (bool, string)) {
	f.T.Helper()
	deadline := time.Now().Add(window)
	for polls := 1; time.Now().Before(deadline); polls++ {
		if ok, msg := cond(); !ok {
			f.T.Fatalf("%s no longer holds after %d polls: %s", what, polls, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// forgedMirror is a Secret that looks like identity's mirror in ns (name,
// label, identity annotation) carrying hash: what a tenant can create in
// its own namespace.
func forgedMirror(ns, identity, hash string, owners []metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credentials.MirrorName(identity),
		Labels:          map[string]string{v1alpha1.LabelMirrored: v1alpha1.LabelTrue},
		Annotations:     map[string]string{v1alpha1.AnnotationIdentity: identity, v1alpha1.AnnotationSourceHash: hash},
		OwnerReferences: owners},
		Data: map[string][]byte{"AWS_SECRET_ACCESS_KEY": []byte("forged")}}
}

// forgedJob is a suspended Job with the manager's label and annotations
// (such as the identity and source-hash ones) and env, controlled by owner
// when not nil.
func forgedJob(ns, name string, annotations map[string]string, owner *metav1.OwnerReference, env []corev1.EnvVar) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{v1alpha1.LabelManaged: v1alpha1.LabelTrue}, Annotations: annotations},
		Spec: batchv1.JobSpec{Suspend: new(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "example.com/forged:1", Env: env}}}}}}
	if owner != nil {
		j.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return j
}

// clusterRef is a controller reference to a TerraformCluster ns/name with
// uid, which need not exist.
func clusterRef(name, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: faultkit.KindCluster, Name: name,
		UID: types.UID(uid), Controller: new(true), BlockOwnerDeletion: new(true)}
}

// forbiddenValues are the package's credential values and their hashes:
// none may appear in a log, event, condition or admission message (X1).
func forbiddenValues() []string {
	out := []string{secretValue, framework.HashOf(framework.DefaultData(secretValue))}
	for i := range rotations {
		out = append(out, framework.HashOf(framework.DefaultData(rotatedValue(i))))
	}
	return out
}

// memory is the manager's RSS (median of five samples a second apart) and
// Go heap in use (go_memstats_heap_inuse_bytes, 0 when not exposed).
type memory struct{ RSS, Heap int64 }

func sampleMemory(f *framework.Fixture) memory {
	f.T.Helper()
	rss, err := faultkit.MedianRSS(f.Ctx, f.Manager.PID(), 5, time.Second)
	if err != nil {
		f.T.Fatal(err)
	}
	m, err := f.Manager.Scrape()
	if err != nil {
		f.T.Fatal(err)
	}
	return memory{RSS: rss, Heap: int64(m.Sum("go_memstats_heap_inuse_bytes", nil))}
}

func (m memory) String() string {
	return fmt.Sprintf("RSS %.1f MiB, Go heap in use %.1f MiB", faultkit.MiB(m.RSS), faultkit.MiB(m.Heap))
}
