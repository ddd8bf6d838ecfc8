package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// Fixture builds the objects integration tests need and waits for their
// state, failing the test with what it last saw.
type Fixture struct {
	T       *testing.T
	Env     *Env
	Ctx     context.Context
	Manager *Manager
	// Settle bounds every wait (a polling deadline, never a sleep).
	Settle time.Duration
}

// NewFixture returns a Fixture using the package's shared manager started
// with o.
func NewFixture(t *testing.T, o ManagerOptions) *Fixture {
	e := Get(t)
	return &Fixture{T: t, Env: e, Ctx: Context(t), Manager: e.SharedManager(t, o), Settle: 60 * time.Second}
}

// Source creates a credentials namespace and Secret; it returns the ref.
func (f *Fixture) Source(data map[string]string) v1alpha1.SecretReference {
	f.T.Helper()
	ns := f.Env.CreateNamespace(f.T, "creds", nil)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud"}, StringData: data}
	if _, err := f.Env.Kube.CoreV1().Secrets(ns).Create(f.Ctx, s, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
	return v1alpha1.SecretReference{Namespace: ns, Name: "cloud"}
}

// DefaultData is source data whose secret key holds value.
func DefaultData(value string) map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": value}
}

// Identity creates an identity; deleted when the test ends (mirrors first).
func (f *Fixture) Identity(ref v1alpha1.SecretReference, allowed *v1alpha1.AllowedNamespaces) string {
	f.T.Helper()
	name := Name("id")
	id := &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: allowed}}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(f.Ctx, id, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() {
		_ = f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// List allows exactly namespaces ns.
func List(ns ...string) *v1alpha1.AllowedNamespaces { return &v1alpha1.AllowedNamespaces{List: ns} }

// Standalone is the annotation that opts a workload object out of SPEC
// K2-K5: it runs without Cluster API owners. The tests of the credential
// engine, the runs and the faults create standalone objects; the tests of
// the Cluster API contract (test/integration/capi, the e2e) create owned
// ones.
func Standalone() map[string]string {
	return map[string]string{v1alpha1.AnnotationStandalone: v1alpha1.LabelTrue}
}

// Cluster creates a TerraformCluster using identity.
func (f *Fixture) Cluster(ns, name, identity string) *v1alpha1.TerraformCluster {
	f.T.Helper()
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identity}, Source: v1alpha1.SourceSpec{Image: "example.com/module:1"}}}
	c, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return c
}

func (f *Fixture) GetCluster(ns, name string) *v1alpha1.TerraformCluster {
	f.T.Helper()
	c, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return c
}

// WaitCondition polls get until condition t has status and reason.
func (f *Fixture) WaitCondition(what string, get func() ([]metav1.Condition, error), t v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) metav1.Condition {
	f.T.Helper()
	var found metav1.Condition
	Eventually(f.T, f.Settle, func() (bool, string) {
		conds, err := get()
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(conds, string(t))
		if c == nil {
			return false, fmt.Sprintf("%s has no %s condition: %s", what, t, Describe(conds))
		}
		found = *c
		return c.Status == status && c.Reason == string(reason), fmt.Sprintf("%s: %s", what, Describe(conds))
	})
	return found
}

// ClusterConds returns a getter of a cluster's conditions.
func (f *Fixture) ClusterConds(ns, name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		c, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return c.Status.Conditions, nil
	}
}

// IdentityConds returns a getter of an identity's conditions.
func (f *Fixture) IdentityConds(name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		i, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return i.Status.Conditions, nil
	}
}

// Mirror reads the mirror of identity in ns; nil when absent.
func (f *Fixture) Mirror(ns, identity string) *corev1.Secret {
	f.T.Helper()
	s, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, credentials.MirrorName(identity), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.T.Fatal(err)
	}
	return s
}

// WaitMirror waits until the mirror exists and ok(mirror) holds.
func (f *Fixture) WaitMirror(ns, identity string, what string, ok func(*corev1.Secret) bool) *corev1.Secret {
	f.T.Helper()
	var m *corev1.Secret
	Eventually(f.T, f.Settle, func() (bool, string) {
		m = f.Mirror(ns, identity)
		if m == nil {
			return false, "no mirror " + credentials.MirrorName(identity) + " in " + ns
		}
		return ok(m), fmt.Sprintf("%s: mirror annotations %v, owners %v", what, m.Annotations, OwnerNames(m))
	})
	return m
}

// WaitNoMirror waits until the mirror of identity in ns is gone.
func (f *Fixture) WaitNoMirror(ns, identity string) {
	f.T.Helper()
	Eventually(f.T, f.Settle, func() (bool, string) {
		m := f.Mirror(ns, identity)
		if m == nil {
			return true, ""
		}
		return false, fmt.Sprintf("mirror still exists with owners %v", OwnerNames(m))
	})
}

// OwnerNames lists a Secret's owners as kind/name.
func OwnerNames(s *corev1.Secret) []string {
	var out []string
	for _, r := range s.OwnerReferences {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// HashOf is the source hash of string data (M4).
func HashOf(data map[string]string) string {
	b := map[string][]byte{}
	for k, v := range data {
		b[k] = []byte(v)
	}
	return credentials.SourceHash(b)
}

// SetSource replaces the source Secret's data (a rotation).
func (f *Fixture) SetSource(ref v1alpha1.SecretReference, data map[string]string) {
	f.T.Helper()
	s, err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Get(f.Ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	s.Data = nil
	s.StringData = data
	if _, err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Update(f.Ctx, s, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// EditIdentity updates an identity with edit.
func (f *Fixture) EditIdentity(name string, edit func(*v1alpha1.TerraformClusterIdentity)) {
	f.T.Helper()
	ids := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	// The manager writes the identity's status meanwhile: a Conflict is
	// retried on a fresh read.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		i, err := ids.Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(i)
		_, err = ids.Update(f.Ctx, i, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// EditCluster updates cluster ns/name with edit. The manager writes the
// cluster's metadata meanwhile (finalizer, provider-fields generation): a
// Conflict is retried on a fresh read, so a test's edit never races it.
func (f *Fixture) EditCluster(ns, name string, edit func(*v1alpha1.TerraformCluster)) {
	f.T.Helper()
	clusters := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := clusters.Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		edit(c)
		_, err = clusters.Update(f.Ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// WaitIdentityNamespaces waits until status.namespaces equals want (S2).
func (f *Fixture) WaitIdentityNamespaces(name string, want []string) {
	f.T.Helper()
	f.WaitFor("identity status.namespaces", func() (bool, string) {
		i, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := i.Status.Namespaces
		if len(got) != len(want) {
			return false, "namespaces " + join(got)
		}
		for k := range got {
			if got[k] != want[k] {
				return false, "namespaces " + join(got)
			}
		}
		return true, ""
	})
}

// join formats a list for messages.
func join(s []string) string { return "[" + strings.Join(s, " ") + "]" }

// WaitFor polls cond until it holds or Settle passes.
func (f *Fixture) WaitFor(what string, cond func() (bool, string)) {
	f.T.Helper()
	Eventually(f.T, f.Settle, func() (bool, string) {
		ok, msg := cond()
		return ok, what + ": " + msg
	})
}

// Jobs lists the Jobs of namespace with action.
func (f *Fixture) Jobs(ns string, action v1alpha1.JobAction) []batchv1.Job {
	f.T.Helper()
	l, err := f.Env.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range l.Items {
		if j.Annotations[v1alpha1.AnnotationJobAction] == string(action) {
			out = append(out, j)
		}
	}
	return out
}

// WaitJob waits for exactly one Job of action in ns.
func (f *Fixture) WaitJob(ns string, action v1alpha1.JobAction) batchv1.Job {
	f.T.Helper()
	var j batchv1.Job
	f.WaitFor(string(action)+" Job", func() (bool, string) {
		js := f.Jobs(ns, action)
		if len(js) == 0 {
			return false, "none yet"
		}
		j = js[0]
		return len(js) == 1, fmt.Sprintf("%d Jobs", len(js))
	})
	return j
}

// HasFinalizer reports whether fs holds captf.io/destroy.
func HasFinalizer(fs []string) bool {
	for _, x := range fs {
		if x == v1alpha1.FinalizerDestroy {
			return true
		}
	}
	return false
}
