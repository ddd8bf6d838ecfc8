package engine

import (
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// abandon releases a cluster without a destroy (V2) and waits until it is
// gone.
func abandon(f *framework.Fixture, ns, name string) {
	f.T.Helper()
	f.EditCluster(ns, name, func(c *v1alpha1.TerraformCluster) {
		c.Annotations[v1alpha1.AnnotationAbandonInfrastructure] = string(c.UID)
	})
	if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil {
		f.T.Fatal(err)
	}
	f.WaitFor("cluster "+name+" gone", func() (bool, string) {
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// TestRunnerServiceAccount proves T1 on the real API server, with the
// manager running as its ServiceAccount under manifests/rbac (so `bind` on
// the ClusterRole captf-runner is what lets it create the RoleBinding): the
// Jobs run as captf-runner, which two clusters of a namespace share as
// owners, and the garbage collector removes it and its RoleBinding with the
// last one. A ServiceAccount named in spec.jobs.serviceAccountName without
// the captf.io/runner label starts no Job.
func TestRunnerServiceAccount(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "runner", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	a, b := f.Cluster(ns, "a", id), f.Cluster(ns, "b", id)

	f.WaitFor("captf-runner owned by both clusters", func() (bool, string) {
		sa, err := f.Env.Kube.CoreV1().ServiceAccounts(ns).Get(f.Ctx, v1alpha1.RunnerName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(sa.OwnerReferences) == 2 && sa.Labels[v1alpha1.LabelManaged] == v1alpha1.LabelTrue, fmt.Sprintf("owners %v labels %v", sa.OwnerReferences, sa.Labels)
	})
	rb, err := f.Env.Kube.RbacV1().RoleBindings(ns).Get(f.Ctx, v1alpha1.RunnerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != v1alpha1.RunnerName ||
		len(rb.Subjects) != 1 || rb.Subjects[0] != (rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: v1alpha1.RunnerName, Namespace: ns}) {
		t.Fatalf("T1: RoleBinding must bind ClusterRole captf-runner to captf-runner alone: %+v %+v", rb.RoleRef, rb.Subjects)
	}
	for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if got := j.Spec.Template.Spec.ServiceAccountName; got != v1alpha1.RunnerName {
			t.Errorf("T1: Job %s runs as %q", j.Name, got)
		}
	}
	// The runner may do what the state backend needs, and only that.
	for _, check := range []struct {
		resource, group, verb string
		want                  bool
	}{{"secrets", "", "create", true}, {"leases", "coordination.k8s.io", "update", true}, {"pods", "", "create", false}, {"configmaps", "", "get", false}} {
		if got := canRunner(f, ns, check.group, check.resource, check.verb); got != check.want {
			t.Errorf("T1: captf-runner %s %s: allowed=%v, want %v", check.verb, check.resource, got, check.want)
		}
	}

	abandon(f, ns, a.Name)
	abandon(f, ns, b.Name)
	f.WaitFor("captf-runner and its RoleBinding collected with the last user", func() (bool, string) {
		_, saErr := f.Env.Kube.CoreV1().ServiceAccounts(ns).Get(f.Ctx, v1alpha1.RunnerName, metav1.GetOptions{})
		_, rbErr := f.Env.Kube.RbacV1().RoleBindings(ns).Get(f.Ctx, v1alpha1.RunnerName, metav1.GetOptions{})
		return apierrors.IsNotFound(saErr) && apierrors.IsNotFound(rbErr), fmt.Sprintf("ServiceAccount: %v, RoleBinding: %v", saErr, rbErr)
	})

	// A named ServiceAccount must carry captf.io/runner=true.
	if _, err := f.Env.Kube.CoreV1().ServiceAccounts(ns).Create(f.Ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "named", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: id},
			Source:      v1alpha1.SourceSpec{Image: "example.com/module:1"},
			Jobs:        v1alpha1.JobsSpec{ServiceAccountName: "ops"},
		},
	}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("named", f.ClusterConds(ns, "named"), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunnerNotFound)
}

// canRunner asks the API server whether captf-runner of ns may verb
// resource there.
func canRunner(f *framework.Fixture, ns, group, resource, verb string) bool {
	f.T.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + v1alpha1.RunnerName,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb},
	}}
	got, err := f.Env.Kube.AuthorizationV1().SubjectAccessReviews().Create(f.Ctx, sar, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return got.Status.Allowed
}

// stateOf creates, as Terraform's kubernetes backend would, the state
// Secret and lock Lease of suffix in ns (SPEC T2).
func stateOf(f *framework.Fixture, ns, suffix string) {
	f.T.Helper()
	labels := map[string]string{"tfstate": "true", "tfstateSecretSuffix": suffix, "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform"}
	if _, err := f.Env.Kube.CoreV1().Secrets(ns).Create(f.Ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "tfstate-default-" + suffix, Labels: labels, Annotations: map[string]string{"encoding": "gzip"}},
		Data:       map[string][]byte{"tfstate": []byte("not read here")},
	}, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
	if _, err := f.Env.Kube.CoordinationV1().Leases(ns).Create(f.Ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-tfstate-default-" + suffix, Labels: labels},
	}, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// stateGone reports whether the state Secret and Lease of suffix are gone.
func stateGone(f *framework.Fixture, ns, suffix string) (bool, string) {
	_, sErr := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, "tfstate-default-"+suffix, metav1.GetOptions{})
	_, lErr := f.Env.Kube.CoordinationV1().Leases(ns).Get(f.Ctx, "lock-tfstate-default-"+suffix, metav1.GetOptions{})
	return apierrors.IsNotFound(sErr) && apierrors.IsNotFound(lErr), fmt.Sprintf("Secret: %v, Lease: %v", sErr, lErr)
}

// TestStateRemovedAfterDestroy proves T2's cleanup on the real API server,
// as the manager's ServiceAccount: after a successful destroy the state
// Secret and lock Lease go before the finalizer; an abandoned object's state
// stays.
func TestStateRemovedAfterDestroy(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "state", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	for _, name := range []string{"gone", "kept"} {
		f.Cluster(ns, name, id)
		stateOf(f, ns, name+"-cluster")
	}
	f.WaitFor("two apply Jobs", func() (bool, string) {
		n := len(f.Jobs(ns, v1alpha1.JobActionApply))
		return n == 2, fmt.Sprintf("%d apply Jobs", n)
	})
	for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
	}

	if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.Ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d := f.WaitJob(ns, v1alpha1.JobActionDestroy)
	if ok, _ := stateGone(f, ns, "gone-cluster"); ok {
		t.Fatal("T2: the state must stay while the destroy runs")
	}
	if err := f.Env.FinishJob(f.Ctx, ns, d.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("gone's state removed after its destroy", func() (bool, string) { return stateGone(f, ns, "gone-cluster") })
	f.WaitFor("cluster gone deleted", func() (bool, string) {
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})

	abandon(f, ns, "kept")
	if ok, msg := stateGone(f, ns, "kept-cluster"); ok {
		t.Fatalf("T2: an abandoned object's state stays: %s", msg)
	}
}

// TestPausedObjectRunsNoJob proves T5's pause on the real API server: a
// cluster carrying cluster.x-k8s.io/paused gets its mirror and Paused=True
// but no Job; removing the annotation starts the apply Job.
func TestPausedObjectRunsNoJob(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "paused", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	pausedCluster(f, ns, "p", id)
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 0 {
		t.Fatalf("T5: a paused object must get no Job, found %d", n)
	}

	setPaused(f, ns, "p", false) // waits for Paused=False/NotPaused
	f.WaitJob(ns, v1alpha1.JobActionApply)
}
