package credentials

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// SourceProblem says why a source Secret may not be used (SPEC C1-C3).
type SourceProblem struct {
	// Reason is SourceRefused, NotOptedIn or CredentialsIncomplete.
	Reason v1alpha1.ConditionReason
	// Message names the Secret, the rule and what to do; never a value.
	Message string
}

// RevokesMirrors reports whether existing mirrors must be removed: a refused
// source (C2) or withdrawn consent (C1) is treated like a revocation. A
// missing required key (C3) only stops new Jobs; the mirrors keep the data
// they have so that running Jobs keep their files.
func (p *SourceProblem) RevokesMirrors() bool {
	return p != nil && p.Reason != v1alpha1.ReasonCredentialsIncomplete
}

// CheckSource applies the rules of SPEC section 14 to the source Secret of
// identity, in order: C2 (always), C1 (when requireConsent), C3. It returns
// nil when the Secret may be used.
func CheckSource(src *corev1.Secret, identity string, requiredKeys []string, requireConsent bool) *SourceProblem {
	ref := src.Namespace + "/" + src.Name
	// C2: never a mirror (which would chain identities and launder access)
	// nor a service-account token (a Kubernetes credential, not a cloud one).
	if src.Labels[v1alpha1.LabelMirrored] == v1alpha1.LabelTrue {
		return &SourceProblem{v1alpha1.ReasonSourceRefused, fmt.Sprintf(
			"Secret %s is a captf mirror (label %s=true) and cannot be a source: point spec.secretRef at the Secret it mirrors",
			ref, v1alpha1.LabelMirrored)}
	}
	if src.Type == corev1.SecretTypeServiceAccountToken {
		return &SourceProblem{v1alpha1.ReasonSourceRefused, fmt.Sprintf(
			"Secret %s is a service-account token (type %s) and cannot be a source: put the cloud credential in an Opaque Secret instead",
			ref, corev1.SecretTypeServiceAccountToken)}
	}
	// C1: the Secret's owner must consent, for this identity.
	if requireConsent {
		if src.Labels[v1alpha1.LabelCredential] != v1alpha1.LabelTrue {
			return &SourceProblem{v1alpha1.ReasonNotOptedIn, fmt.Sprintf(
				"Secret %s does not carry the label %s=true: its owner has not consented to its use (--require-source-consent); the owner adds the label and lists %s in annotation %s",
				ref, v1alpha1.LabelCredential, identity, v1alpha1.AnnotationCredentialIdentities)}
		}
		if !ConsentsTo(src.Annotations[v1alpha1.AnnotationCredentialIdentities], identity) {
			return &SourceProblem{v1alpha1.ReasonNotOptedIn, fmt.Sprintf(
				"Secret %s does not list TerraformClusterIdentity %s in annotation %s (comma-separated names, or *): its owner has not consented to this identity",
				ref, identity, v1alpha1.AnnotationCredentialIdentities)}
		}
	}
	// C3: every required key present (an empty value counts).
	var missing []string
	for _, k := range requiredKeys {
		if _, ok := src.Data[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return &SourceProblem{v1alpha1.ReasonCredentialsIncomplete, fmt.Sprintf(
			"Secret %s lacks required keys %s (spec.requiredKeys): no Job starts until they exist", ref, strings.Join(missing, ", "))}
	}
	return nil
}

// ConsentsTo reports whether a captf.io/credential-identities value names
// identity: a comma-separated list of names, or "*" for any (SPEC C1).
func ConsentsTo(annotation, identity string) bool {
	for _, n := range strings.Split(annotation, ",") {
		n = strings.TrimSpace(n)
		if n == "*" || (n != "" && n == identity) {
			return true
		}
	}
	return false
}

// envName is a portable environment variable name (POSIX, and what
// Kubernetes accepted before relaxed validation): a letter or underscore,
// then letters, digits and underscores.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Hygiene is the C4 report on a source's keys: key names by category,
// never values.
type Hygiene struct {
	// NotEnvNames are keys that are not portable environment variable
	// names: envFrom may skip them and shells and providers cannot read
	// them; they still arrive as files.
	NotEnvNames []string
	// Dropped are keys starting with TF_ or KUBE_: the runner removes them
	// from the environment (J6), or the Job's own env overrides them (J3);
	// they still arrive as files.
	Dropped []string
	// BadValues are keys whose value is empty or ends with whitespace (a
	// trailing newline from copy-paste is the usual cause).
	BadValues []string
}

// CheckHygiene reports keys of data that need attention (SPEC C4).
func CheckHygiene(data map[string][]byte) Hygiene {
	var h Hygiene
	for k, v := range data {
		if !envName.MatchString(k) {
			h.NotEnvNames = append(h.NotEnvNames, k)
		}
		// The runner drops these (J6); the three the Job sets itself are
		// overridden by its env (J3): none reaches the module as set here.
		if strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "KUBE_") {
			h.Dropped = append(h.Dropped, k)
		}
		if len(v) == 0 || endsWithSpace(v) {
			h.BadValues = append(h.BadValues, k)
		}
	}
	sort.Strings(h.NotEnvNames)
	sort.Strings(h.Dropped)
	sort.Strings(h.BadValues)
	return h
}

// endsWithSpace reports whether v ends with a Unicode space, or an ASCII
// one when v is not valid UTF-8 there.
func endsWithSpace(v []byte) bool {
	r, _ := utf8.DecodeLastRune(v)
	if r == utf8.RuneError {
		return strings.ContainsRune(" \t\n\v\f\r", rune(v[len(v)-1]))
	}
	return unicode.IsSpace(r)
}

// OK reports whether no key needs attention.
func (h Hygiene) OK() bool { return len(h.NotEnvNames)+len(h.Dropped)+len(h.BadValues) == 0 }

// Message lists the key names by category (never values).
func (h Hygiene) Message() string {
	if h.OK() {
		return "every key is a valid environment variable name that reaches the module, with a non-empty value without trailing whitespace"
	}
	var parts []string
	if len(h.NotEnvNames) > 0 {
		parts = append(parts, "not valid environment variable names (envFrom may skip them; they are still files): "+strings.Join(h.NotEnvNames, ", "))
	}
	if len(h.Dropped) > 0 {
		parts = append(parts, "start with TF_ or KUBE_ (the runner drops them from the environment; they are still files): "+strings.Join(h.Dropped, ", "))
	}
	if len(h.BadValues) > 0 {
		parts = append(parts, "empty, or ending with whitespace such as a trailing newline: "+strings.Join(h.BadValues, ", "))
	}
	return "keys that need attention: " + strings.Join(parts, "; ")
}
