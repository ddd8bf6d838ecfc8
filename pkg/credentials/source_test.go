package credentials

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

const value = "c4-S3CRET-value"

func secret(mutate func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "creds", Name: "cloud"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA"), "AWS_SECRET_ACCESS_KEY": []byte(value)},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func consent(ids string) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		s.Labels = map[string]string{v1alpha1.LabelCredential: "true"}
		s.Annotations = map[string]string{v1alpha1.AnnotationCredentialIdentities: ids}
	}
}

func TestCheckSource(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src      *corev1.Secret
		consent  bool
		required []string
		want     v1alpha1.ConditionReason // "" means usable
		revokes  bool
		msg      string
	}{
		{name: "plain Secret, consent off", src: secret(nil)},
		{name: "C2 a mirror is refused", src: secret(func(s *corev1.Secret) { s.Labels = map[string]string{v1alpha1.LabelMirrored: "true"} }),
			want: v1alpha1.ReasonSourceRefused, revokes: true, msg: "creds/cloud is a captf mirror"},
		{name: "C2 a mirror is refused even with consent", consent: true,
			src:  secret(func(s *corev1.Secret) { consent("*")(s); s.Labels[v1alpha1.LabelMirrored] = "true" }),
			want: v1alpha1.ReasonSourceRefused, revokes: true},
		{name: "C2 a service-account token is refused", src: secret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken }),
			want: v1alpha1.ReasonSourceRefused, revokes: true, msg: "service-account token"},
		{name: "C1 no label", consent: true, src: secret(nil), want: v1alpha1.ReasonNotOptedIn, revokes: true, msg: "label captf.io/credential=true"},
		{name: "C1 label without the annotation", consent: true,
			src:  secret(func(s *corev1.Secret) { s.Labels = map[string]string{v1alpha1.LabelCredential: "true"} }),
			want: v1alpha1.ReasonNotOptedIn, revokes: true, msg: "does not list TerraformClusterIdentity aws"},
		{name: "C1 annotation names others", consent: true, src: secret(consent("gcp, azure")), want: v1alpha1.ReasonNotOptedIn, revokes: true},
		{name: "C1 annotation names it among others", consent: true, src: secret(consent("gcp, aws"))},
		{name: "C1 star", consent: true, src: secret(consent("*"))},
		{name: "C1 label false", consent: true,
			src:  secret(func(s *corev1.Secret) { consent("aws")(s); s.Labels[v1alpha1.LabelCredential] = "false" }),
			want: v1alpha1.ReasonNotOptedIn, revokes: true},
		{name: "C1 off ignores missing consent", src: secret(consent("gcp"))},
		{name: "C3 all required keys present", src: secret(nil), required: []string{"AWS_ACCESS_KEY_ID"}},
		{name: "C3 an empty value counts as present", required: []string{"EMPTY"},
			src: secret(func(s *corev1.Secret) { s.Data["EMPTY"] = nil })},
		{name: "C3 missing keys are named, sorted", src: secret(nil), required: []string{"Z_KEY", "AWS_ACCESS_KEY_ID", "A_KEY"},
			want: v1alpha1.ReasonCredentialsIncomplete, msg: "lacks required keys A_KEY, Z_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := CheckSource(tc.src, "aws", tc.required, tc.consent)
			if tc.want == "" {
				require.Nil(t, p)
				require.False(t, p.RevokesMirrors())
				return
			}
			require.NotNil(t, p)
			require.Equal(t, tc.want, p.Reason)
			require.Equal(t, tc.revokes, p.RevokesMirrors())
			require.Contains(t, p.Message, tc.msg)
			require.NotContains(t, p.Message, value, "X1")
		})
	}
}

func TestCheckHygiene(t *testing.T) {
	// C4: categories by key name; values never appear.
	h := CheckHygiene(map[string][]byte{
		"AWS_ACCESS_KEY_ID":     []byte("AKIA"),
		"API_KEY":               []byte(value + "\n"),
		"TOKEN":                 []byte(value + " "),
		"EMPTY":                 {},
		"a.b":                   []byte("x"),
		"1x":                    []byte("x"),
		"with-dash":             []byte("x"),
		"TF_VAR_region":         []byte("eu"),
		"KUBE_TOKEN":            []byte("t"),
		"_ok":                   []byte("x"),
		"NBSP":                  []byte(value + "\u00a0"),
		"BINARY":                {0xff, 0x85},
		"AWS_SECRET_ACCESS_KEY": []byte(value),
	})
	require.Equal(t, []string{"1x", "a.b", "with-dash"}, h.NotEnvNames)
	require.Equal(t, []string{"KUBE_TOKEN", "TF_VAR_region"}, h.Dropped)
	require.Equal(t, []string{"API_KEY", "EMPTY", "NBSP", "TOKEN"}, h.BadValues)
	require.False(t, h.OK())
	msg := h.Message()
	for _, k := range []string{"a.b", "1x", "with-dash", "TF_VAR_region", "KUBE_TOKEN", "API_KEY", "EMPTY", "TOKEN"} {
		require.Contains(t, msg, k)
	}
	require.False(t, strings.Contains(msg, value), "X1: a value leaked into the message")

	clean := CheckHygiene(map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA")})
	require.True(t, clean.OK())
	require.NotEmpty(t, clean.Message())
}

func TestConsentsTo(t *testing.T) {
	require.True(t, ConsentsTo("*", "x"))
	require.True(t, ConsentsTo(" a , x ", "x"))
	require.False(t, ConsentsTo("", "x"))
	require.False(t, ConsentsTo("xx,y", "x"))
	require.False(t, ConsentsTo(",", ""))
}

// M7: ForeignReason names why a Secret is not this identity's mirror, and
// agrees with IsForeign, including a labelled, annotated Secret whose type
// is not Opaque (a type cannot be changed by an update).
func TestForeignReason(t *testing.T) {
	mirror := DesiredMirror("aws", "team-a", map[string][]byte{"K": []byte("v")})
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Secret)
		want   string
	}{
		{"ours", func(*corev1.Secret) {}, ""},
		{"no label", func(s *corev1.Secret) { delete(s.Labels, v1alpha1.LabelMirrored) }, "without the label"},
		{"no annotation", func(s *corev1.Secret) { delete(s.Annotations, v1alpha1.AnnotationIdentity) }, "no captf.io/identity annotation"},
		{"other identity", func(s *corev1.Secret) { s.Annotations[v1alpha1.AnnotationIdentity] = "gcp" }, "mirror of TerraformClusterIdentity gcp"},
		{"not Opaque", func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockerConfigJson }, "not Opaque"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mirror.DeepCopy()
			tc.mutate(s)
			got := ForeignReason(s, "aws")
			require.Equal(t, tc.want != "", IsForeign(s, "aws"))
			if tc.want == "" {
				require.Empty(t, got)
			} else {
				require.Contains(t, got, tc.want)
			}
		})
	}
	require.Empty(t, ForeignReason(nil, "aws"), "nothing holds the name")
}
