package consent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestConsentAddedWithdrawnReadded covers C1 end to end.
func TestConsentAddedWithdrawnReadded(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	ref := f.Source(framework.DefaultData(secretValue)) // no consent yet
	id := f.Identity(ref, framework.List(ns))
	c := f.Cluster(ns, "demo", id)

	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotOptedIn)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNotOptedIn)
	if f.Mirror(ns, id) != nil {
		t.Fatal("C1: no mirror without consent")
	}
	noJobs(f, ns)

	// The owner consents for this identity.
	setConsent(f, ref, map[string]string{v1alpha1.LabelCredential: "true"}, map[string]string{v1alpha1.AnnotationCredentialIdentities: "other, " + id})
	f.WaitMirror(ns, id, "created after consent", func(*corev1.Secret) bool { return true })
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)

	// Withdrawn (the annotation no longer names it): like a revocation.
	setConsent(f, ref, map[string]string{v1alpha1.LabelCredential: "true"}, map[string]string{v1alpha1.AnnotationCredentialIdentities: "other"})
	f.WaitNoMirror(ns, id)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNotOptedIn)
	f.WaitIdentityNamespaces(id, nil)

	// Re-added with "*".
	setConsent(f, ref, map[string]string{v1alpha1.LabelCredential: "true"}, map[string]string{v1alpha1.AnnotationCredentialIdentities: "*"})
	f.WaitMirror(ns, id, "re-created", func(*corev1.Secret) bool { return true })
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
}

// TestRefusedSources covers C2: a mirror and a service-account token are
// refused as sources, whatever their labels say.
func TestRefusedSources(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	ref := consentedSource(f, "*", framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(ns))
	f.Cluster(ns, "demo", id)
	mirror := f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })

	// An identity pointed at that mirror, consent labels copied onto it.
	setConsent(f, v1alpha1.SecretReference{Namespace: ns, Name: mirror.Name},
		map[string]string{v1alpha1.LabelMirrored: "true", v1alpha1.LabelManaged: "true", v1alpha1.LabelCredential: "true"},
		map[string]string{v1alpha1.AnnotationIdentity: id, v1alpha1.AnnotationSourceHash: mirror.Annotations[v1alpha1.AnnotationSourceHash], v1alpha1.AnnotationCredentialIdentities: "*"})
	other := f.Env.CreateNamespace(t, "other", nil)
	laundered := f.Identity(v1alpha1.SecretReference{Namespace: ns, Name: mirror.Name}, framework.List(other))
	cond := f.WaitCondition("identity", f.IdentityConds(laundered), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSourceRefused)
	if !strings.Contains(cond.Message, "captf mirror") || !strings.Contains(cond.Message, "point spec.secretRef at the Secret it mirrors") {
		t.Errorf("C2: the message must say why and what to do: %q", cond.Message)
	}
	f.Cluster(other, "demo", laundered)
	f.WaitCondition("cluster", f.ClusterConds(other, "demo"), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonSourceRefused)
	if f.Mirror(other, laundered) != nil {
		t.Fatal("C2: a mirror must never be mirrored on")
	}

	// A service-account token.
	credNS := f.Env.CreateNamespace(t, "sa", nil)
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credNS, Name: "token",
		Labels:      map[string]string{v1alpha1.LabelCredential: "true"},
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "default", v1alpha1.AnnotationCredentialIdentities: "*"}},
		Type: corev1.SecretTypeServiceAccountToken}
	if _, err := f.Env.Kube.CoreV1().Secrets(credNS).Create(f.Ctx, tok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	saID := f.Identity(v1alpha1.SecretReference{Namespace: credNS, Name: "token"}, framework.List(other))
	cond = f.WaitCondition("identity", f.IdentityConds(saID), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSourceRefused)
	if !strings.Contains(cond.Message, "service-account token") {
		t.Errorf("C2: %q", cond.Message)
	}
}

// TestRequiredKeyBlocksApply covers C3: a missing required key holds the
// apply Job back until the key exists.
func TestRequiredKeyBlocksApply(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := consentedSource(f, "*", data)
	id := framework.Name("id")
	identityWithKeys(f, id, ref, framework.List(ns), []string{"AWS_REGION", "AWS_ACCESS_KEY_ID"})
	c := f.Cluster(ns, "demo", id)
	cond := f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCredentialsIncomplete)
	if !strings.Contains(cond.Message, "AWS_REGION") || strings.Contains(cond.Message, "AWS_ACCESS_KEY_ID") {
		t.Errorf("C3: the message names exactly the missing key: %q", cond.Message)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonCredentialsIncomplete)
	time.Sleep(2 * syncPeriod)
	noJobs(f, ns)

	data["AWS_REGION"] = "" // an empty value counts as present
	f.SetSource(ref, data)
	f.WaitJob(ns, v1alpha1.JobActionApply)
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
}

// TestHygieneReport covers C4: keys are named by category, never a value,
// in the condition, the event and the manager's log.
func TestHygieneReport(t *testing.T) {
	f := setup(t)
	ref := consentedSource(f, "*", map[string]string{
		"API_KEY":       secretValue + "\n",
		"TF_VAR_region": secretValue,
		"a.b":           secretValue,
		"GOOD":          "fine",
	})
	id := f.Identity(ref, nil)
	cond := f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionCredentialsValid, metav1.ConditionFalse, v1alpha1.ReasonKeysNeedAttention)
	for _, k := range []string{"API_KEY", "TF_VAR_region", "a.b"} {
		if !strings.Contains(cond.Message, k) {
			t.Errorf("C4: %q not named in %q", k, cond.Message)
		}
	}
	if strings.Contains(cond.Message, "GOOD") {
		t.Errorf("C4: a clean key is named: %q", cond.Message)
	}
	f.WaitFor("KeysNeedAttention event", func() (bool, string) {
		ev, err := f.Env.Kube.CoreV1().Events("").List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventKeysNeedAttention + ",involvedObject.name=" + id})
		return err == nil && len(ev.Items) == 1, "no event yet"
	})
	// Fixing the values clears it.
	f.SetSource(ref, map[string]string{"API_KEY": "trimmed", "GOOD": "fine"})
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionCredentialsValid, metav1.ConditionTrue, v1alpha1.ReasonKeysValid)
}
