// Package consent tests SPEC section 14 on a real control plane, with the
// manager run as its ServiceAccount user with --require-source-consent:
// consent (C1), refused sources (C2), required keys (C3), the hygiene report
// (C4), rotation completeness (C5) and re-apply on rotation (C6). Consent
// off is every other integration package.
package consent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true})
}

// secretValue must never appear in a condition, event or log (X1, C4).
const secretValue = "c1-CONSENT-s3cret-91bd"

const syncPeriod = 3 * time.Second

func setup(t *testing.T) *framework.Fixture {
	return framework.NewFixture(t, framework.ManagerOptions{User: controlplane.Manager,
		Args: []string{"--require-source-consent", "--sync-period=" + syncPeriod.String(), "--identity-resync=2s"}})
}

// consentedSource creates a source Secret whose owner consents to ids.
func consentedSource(f *framework.Fixture, ids string, data map[string]string) v1alpha1.SecretReference {
	f.T.Helper()
	ref := f.Source(data)
	setConsent(f, ref, map[string]string{v1alpha1.LabelCredential: "true"}, map[string]string{v1alpha1.AnnotationCredentialIdentities: ids})
	return ref
}

// setConsent replaces the source's labels and annotations.
func setConsent(f *framework.Fixture, ref v1alpha1.SecretReference, labels, annotations map[string]string) {
	f.T.Helper()
	secrets := f.Env.Kube.CoreV1().Secrets(ref.Namespace)
	s, err := secrets.Get(f.Ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	s.Labels, s.Annotations = labels, annotations
	if _, err := secrets.Update(f.Ctx, s, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// identityWithKeys creates an identity with spec.requiredKeys.
func identityWithKeys(f *framework.Fixture, name string, ref v1alpha1.SecretReference, allowed *v1alpha1.AllowedNamespaces, required []string) {
	f.T.Helper()
	id := &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: allowed, RequiredKeys: required}}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(f.Ctx, id, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

func noJobs(f *framework.Fixture, ns string) {
	f.T.Helper()
	if j := f.Jobs(ns, v1alpha1.JobActionApply); len(j) != 0 {
		f.T.Fatalf("no Job may start, found %d", len(j))
	}
}
