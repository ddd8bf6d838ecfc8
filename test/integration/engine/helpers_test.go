package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// secretValue is the credential value every test's source Secret carries;
// TestX1NoSecretValueAnywhere scans for it at the end (SPEC X1).
const secretValue = "x1-Cr3dential-VALUE-7f3a9c"

// The shared manager's periods are short so R2 and S1 can be observed.
const (
	syncPeriod     = 4 * time.Second
	identityResync = 3 * time.Second
	// settle bounds every wait: several sync periods plus queue time on a
	// loaded 2-core machine. It is a deadline for polling, never a sleep.
	settle = 60 * time.Second
)

var managerArgs = []string{
	"--sync-period=" + syncPeriod.String(),
	"--identity-resync=" + identityResync.String(),
	"--workers=4",
}

type fixture struct {
	t   *testing.T
	e   *framework.Env
	ctx context.Context
	m   *framework.Manager
}

func setup(t *testing.T) *fixture {
	e := framework.Get(t)
	m := e.SharedManager(t, framework.ManagerOptions{User: controlplane.Manager, Args: managerArgs})
	return &fixture{t: t, e: e, ctx: framework.Context(t), m: m}
}

// source creates a credentials namespace and Secret; it returns the ref.
func (f *fixture) source(data map[string]string) v1.SecretReference {
	f.t.Helper()
	ns := f.e.CreateNamespace(f.t, "creds", nil)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud"}, StringData: data}
	if _, err := f.e.Kube.CoreV1().Secrets(ns).Create(f.ctx, s, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return v1.SecretReference{Namespace: ns, Name: "cloud"}
}

func defaultData() map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": secretValue}
}

// identity creates an identity; deleted when the test ends (mirrors first).
func (f *fixture) identity(ref v1.SecretReference, allowed *v1.AllowedNamespaces) string {
	f.t.Helper()
	name := framework.Name("id")
	id := &v1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: allowed}}
	if _, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(f.ctx, id, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func list(ns ...string) *v1.AllowedNamespaces { return &v1.AllowedNamespaces{List: ns} }

// cluster creates a TerraformCluster using identity.
func (f *fixture) cluster(ns, name, identity string) *v1.TerraformCluster {
	f.t.Helper()
	c := &v1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.TerraformClusterSpec{IdentityRef: &v1.IdentityReference{Name: identity}, Source: v1.SourceSpec{Image: "example.com/module:1"}}}
	c, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.ctx, c, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) getCluster(ns, name string) *v1.TerraformCluster {
	f.t.Helper()
	c, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// waitCondition polls get until condition t has status and reason.
func (f *fixture) waitCondition(what string, get func() ([]metav1.Condition, error), t v1.ConditionType, status metav1.ConditionStatus, reason v1.ConditionReason) metav1.Condition {
	f.t.Helper()
	var found metav1.Condition
	framework.Eventually(f.t, settle, func() (bool, string) {
		conds, err := get()
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(conds, string(t))
		if c == nil {
			return false, fmt.Sprintf("%s has no %s condition: %s", what, t, framework.Describe(conds))
		}
		found = *c
		return c.Status == status && c.Reason == string(reason), fmt.Sprintf("%s: %s", what, framework.Describe(conds))
	})
	return found
}

func (f *fixture) clusterConds(ns, name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		c, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return c.Status.Conditions, nil
	}
}

func (f *fixture) identityConds(name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		i, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return i.Status.Conditions, nil
	}
}

// mirror reads the mirror of identity in ns; nil when absent.
func (f *fixture) mirror(ns, identity string) *corev1.Secret {
	f.t.Helper()
	s, err := f.e.Kube.CoreV1().Secrets(ns).Get(f.ctx, credentials.MirrorName(identity), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// waitMirror waits until the mirror exists and ok(mirror) holds.
func (f *fixture) waitMirror(ns, identity string, what string, ok func(*corev1.Secret) bool) *corev1.Secret {
	f.t.Helper()
	var m *corev1.Secret
	framework.Eventually(f.t, settle, func() (bool, string) {
		m = f.mirror(ns, identity)
		if m == nil {
			return false, "no mirror " + credentials.MirrorName(identity) + " in " + ns
		}
		return ok(m), fmt.Sprintf("%s: mirror annotations %v, owners %v", what, m.Annotations, ownerNames(m))
	})
	return m
}

func (f *fixture) waitNoMirror(ns, identity string) {
	f.t.Helper()
	framework.Eventually(f.t, settle, func() (bool, string) {
		m := f.mirror(ns, identity)
		if m == nil {
			return true, ""
		}
		return false, fmt.Sprintf("mirror still exists with owners %v", ownerNames(m))
	})
}

func ownerNames(s *corev1.Secret) []string {
	var out []string
	for _, r := range s.OwnerReferences {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// hashOf is the source hash of string data (M4).
func hashOf(data map[string]string) string {
	b := map[string][]byte{}
	for k, v := range data {
		b[k] = []byte(v)
	}
	return credentials.SourceHash(b)
}

// setSource replaces the source Secret's data (a rotation).
func (f *fixture) setSource(ref v1.SecretReference, data map[string]string) {
	f.t.Helper()
	s, err := f.e.Kube.CoreV1().Secrets(ref.Namespace).Get(f.ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	s.Data = nil
	s.StringData = data
	if _, err := f.e.Kube.CoreV1().Secrets(ref.Namespace).Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}
