package identity

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
)

// wantErr is an expected field error; detail "" skips the detail (A1 errors
// carry apimachinery's own wording).
type wantErr struct {
	typ    field.ErrorType
	field  string
	detail string
}

// Messages of a refusal, spelled out so the tests show the whole text a user
// gets: names only (SPEC X1).
const (
	createOrSecretRefWhy = "creating an identity, changing spec.secretRef or widening spec.allowedNamespaces requires get access to the Secret it names"
	wideningWhy          = "widening spec.allowedNamespaces requires get access to the Secret the identity names (narrowing does not)"
	requiredKeysWhy      = "changing spec.requiredKeys requires get access to the Secret the identity names (CredentialsIncomplete reveals which keys it lacks)"
)

func sarRefusal(user, ns, name, why string) string {
	return fmt.Sprintf("user %q may not get Secret %s/%s: %s", user, ns, name, why)
}

// Not parallel: the cases read the process-wide captf_sar_denials_total.
func TestValidate(t *testing.T) {
	aliceDenied := sarRefusal(alice.Username, secretNS, secretName, createOrSecretRefWhy)
	defaultSAR := wantSARSpec(alice, secretNS, secretName)
	invalidSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}

	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		old, new *v1alpha1.TerraformClusterIdentity
		sar      sarAnswer
		// refs and usersErr are what Users returns.
		refs     []index.Ref
		usersErr error
		// wantSAR is the one review expected, nil for none at all.
		wantSAR      *authorizationv1.SubjectAccessReviewSpec
		wantErrs     []wantErr
		wantInternal string
		// wantDenials is how much captf_sar_denials_total grows.
		wantDenials float64
		// wantUsersAsked is the identities Users is asked about.
		wantUsersAsked []string
	}{
		// A2: create.
		{
			name:    "A2 create allowed when the user may get the Secret",
			op:      admissionv1.Create,
			new:     newIdentity(),
			sar:     sarAllow,
			wantSAR: &defaultSAR,
		},
		{
			name:        "A2 create denied names the user and the Secret, and is counted",
			op:          admissionv1.Create,
			new:         newIdentity(),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.secretRef", aliceDenied}},
			wantDenials: 1,
		},
		{
			name:        "A2 create refused when no authorizer has an opinion",
			op:          admissionv1.Create,
			new:         newIdentity(),
			sar:         sarAnswer{},
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.secretRef", aliceDenied}},
			wantDenials: 1,
		},
		{
			name:        "B14 create refused without the authorizer's evaluation error (it names Roles in the Secret's namespace)",
			op:          admissionv1.Create,
			new:         newIdentity(),
			sar:         sarAnswer{evaluationError: `RBAC: role.rbac.authorization.k8s.io "secret-reader" not found`},
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.secretRef", aliceDenied}},
			wantDenials: 1,
		},
		{
			name:         "A5 create with a failing SubjectAccessReview is an internal error",
			op:           admissionv1.Create,
			new:          newIdentity(),
			sar:          sarError,
			wantSAR:      &defaultSAR,
			wantInternal: `creating a SubjectAccessReview for user "alice@example.com" on Secret captf-system/aws-credentials: the server is currently unable to handle the request`,
		},
		{
			name:    "A2 create with selector: {} reviews the Secret like any other",
			op:      admissionv1.Create,
			new:     newIdentity(withoutList, withSelector(&metav1.LabelSelector{})),
			sar:     sarAllow,
			wantSAR: &defaultSAR,
		},

		// A1: the selector checks CEL cannot do.
		{
			name:     "A1 create with an invalid selector label key is refused at the selector, without a review",
			op:       admissionv1.Create,
			new:      newIdentity(withSelector(invalidSelector)),
			sar:      sarAllow,
			wantErrs: []wantErr{{field.ErrorTypeInvalid, "spec.allowedNamespaces.selector.matchLabels", ""}},
		},
		{
			name: "A1 create with an invalid matchExpressions value is refused at its path",
			op:   admissionv1.Create,
			new: newIdentity(withSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "not a value!"}},
			}})),
			sar:      sarAllow,
			wantErrs: []wantErr{{field.ErrorTypeInvalid, "spec.allowedNamespaces.selector.matchExpressions[0].values[1]", ""}},
		},
		{
			name: "A1 create with an invalid matchExpressions key is refused at its path",
			op:   admissionv1.Create,
			new: newIdentity(withSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "-team", Operator: metav1.LabelSelectorOpExists},
			}})),
			sar:      sarAllow,
			wantErrs: []wantErr{{field.ErrorTypeInvalid, "spec.allowedNamespaces.selector.matchExpressions[0].key", ""}},
		},
		{
			name:     "A1 update introducing an invalid selector is refused",
			op:       admissionv1.Update,
			old:      newIdentity(),
			new:      newIdentity(withSelector(invalidSelector)),
			sar:      sarAllow,
			wantErrs: []wantErr{{field.ErrorTypeInvalid, "spec.allowedNamespaces.selector.matchLabels", ""}},
		},
		{
			name: "A1 ratchets: a stored invalid selector does not block narrowing the list",
			op:   admissionv1.Update,
			old:  newIdentity(withSelector(invalidSelector)),
			new:  newIdentity(withSelector(invalidSelector), withList("ns-a")),
		},
		{
			name: "A1 ratchets: removing a stored invalid selector is narrowing",
			op:   admissionv1.Update,
			old:  newIdentity(withSelector(invalidSelector)),
			new:  newIdentity(),
		},

		// A3: update.
		{
			name:        "A3 changing spec.secretRef is denied when the user may not get the new Secret",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withSecret("vault", "gcp-credentials")),
			sar:         sarDeny,
			wantSAR:     ptr(wantSARSpec(alice, "vault", "gcp-credentials")),
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.secretRef", sarRefusal(alice.Username, "vault", "gcp-credentials", createOrSecretRefWhy)}},
			wantDenials: 1,
		},
		{
			name:    "A3 changing spec.secretRef is allowed when the user may get the new Secret",
			op:      admissionv1.Update,
			old:     newIdentity(),
			new:     newIdentity(withSecret(secretNS, "aws-credentials-v2")),
			sar:     sarAllow,
			wantSAR: ptr(wantSARSpec(alice, secretNS, "aws-credentials-v2")),
		},
		{
			name:        "A3 changing spec.secretRef and widening at once needs one review, reported at spec.secretRef",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withSecret("vault", "gcp-credentials"), withList("ns-a", "ns-b", "ns-c")),
			sar:         sarDeny,
			wantSAR:     ptr(wantSARSpec(alice, "vault", "gcp-credentials")),
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.secretRef", sarRefusal(alice.Username, "vault", "gcp-credentials", createOrSecretRefWhy)}},
			wantDenials: 1,
		},
		{
			name:         "A5 changing spec.secretRef with a failing SubjectAccessReview is an internal error",
			op:           admissionv1.Update,
			old:          newIdentity(),
			new:          newIdentity(withSecret("vault", "gcp-credentials")),
			sar:          sarError,
			wantSAR:      ptr(wantSARSpec(alice, "vault", "gcp-credentials")),
			wantInternal: `creating a SubjectAccessReview for user "alice@example.com" on Secret vault/gcp-credentials`,
		},
		{
			name:        "A3 widening by list growth is denied at spec.allowedNamespaces",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withList("ns-a", "ns-b", "ns-c")),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.allowedNamespaces", sarRefusal(alice.Username, secretNS, secretName, wideningWhy)}},
			wantDenials: 1,
		},
		{
			name:    "A3 widening by list growth is allowed when the user may get the Secret",
			op:      admissionv1.Update,
			old:     newIdentity(),
			new:     newIdentity(withList("ns-a", "ns-b", "ns-c")),
			sar:     sarAllow,
			wantSAR: &defaultSAR,
		},
		{
			name:        "A3 widening from unset allowedNamespaces needs a review",
			op:          admissionv1.Update,
			old:         newIdentity(withoutAllowedNamespaces),
			new:         newIdentity(withList("ns-a")),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.allowedNamespaces", sarRefusal(alice.Username, secretNS, secretName, wideningWhy)}},
			wantDenials: 1,
		},
		{
			name:        "A3 widening by adding a selector needs a review",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withSelector(matchLabels("team", "a"))),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.allowedNamespaces", sarRefusal(alice.Username, secretNS, secretName, wideningWhy)}},
			wantDenials: 1,
		},
		{
			name:        "A3 widening by changing the selector needs a review",
			op:          admissionv1.Update,
			old:         newIdentity(withSelector(matchLabels("team", "a"))),
			new:         newIdentity(withSelector(matchLabels("team", "b"))),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.allowedNamespaces", sarRefusal(alice.Username, secretNS, secretName, wideningWhy)}},
			wantDenials: 1,
		},
		{
			name:    "A3 widening by changing the selector is allowed when the user may get the Secret",
			op:      admissionv1.Update,
			old:     newIdentity(withSelector(matchLabels("team", "a"))),
			new:     newIdentity(withSelector(matchLabels("team", "a", "env", "prod"))),
			sar:     sarAllow,
			wantSAR: &defaultSAR,
		},
		{
			name:        "A3 widening by selector: {} replacing a list needs a review",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withoutList, withSelector(&metav1.LabelSelector{})),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.allowedNamespaces", sarRefusal(alice.Username, secretNS, secretName, wideningWhy)}},
			wantDenials: 1,
		},
		{
			name:         "A5 widening with a failing SubjectAccessReview is an internal error",
			op:           admissionv1.Update,
			old:          newIdentity(),
			new:          newIdentity(withList("ns-a", "ns-b", "ns-c")),
			sar:          sarError,
			wantSAR:      &defaultSAR,
			wantInternal: "the server is currently unable to handle the request",
		},
		{
			name: "A3 narrowing by list shrink needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(),
			new:  newIdentity(withList("ns-b")),
			sar:  sarDeny,
		},
		{
			name: "A3 narrowing to an empty list needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(),
			new:  newIdentity(withList()),
			sar:  sarDeny,
		},
		{
			name: "A3 narrowing by removing the selector needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(withSelector(matchLabels("team", "a"))),
			new:  newIdentity(),
			sar:  sarDeny,
		},
		{
			name: "A3 narrowing by removing selector: {} needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(withoutList, withSelector(&metav1.LabelSelector{})),
			new:  newIdentity(withList()),
			sar:  sarDeny,
		},
		{
			name: "A3 narrowing by unsetting allowedNamespaces needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(withSelector(&metav1.LabelSelector{})),
			new:  newIdentity(withoutAllowedNamespaces),
			sar:  sarDeny,
		},
		{
			name: "A3 respelling the selector (matchLabels as In) is not widening",
			op:   admissionv1.Update,
			old:  newIdentity(withSelector(matchLabels("team", "a"))),
			new: newIdentity(withSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}},
			}})),
			sar: sarDeny,
		},
		{
			name: "A3 a metadata-only edit (labels, annotations) needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(),
			new:  newIdentity(withMetadataEdit),
			sar:  sarDeny,
		},
		{
			name: "A3 an update with an equal spec needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(withStatusNamespaces("ns-a")),
			new:  newIdentity(withStatusNamespaces("ns-a", "ns-b")),
			sar:  sarDeny,
		},

		// B9: a change of spec.requiredKeys probes the Secret's key names.
		{
			name:        "B9 adding spec.requiredKeys is denied when the user may not get the Secret",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withRequiredKeys("AWS_ACCESS_KEY_ID")),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.requiredKeys", sarRefusal(alice.Username, secretNS, secretName, requiredKeysWhy)}},
			wantDenials: 1,
		},
		{
			name:    "B9 adding a required key is allowed when the user may get the Secret",
			op:      admissionv1.Update,
			old:     newIdentity(withRequiredKeys("AWS_ACCESS_KEY_ID")),
			new:     newIdentity(withRequiredKeys("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")),
			sar:     sarAllow,
			wantSAR: &defaultSAR,
		},
		{
			name:        "B9 removing a required key needs the review too (the condition flips)",
			op:          admissionv1.Update,
			old:         newIdentity(withRequiredKeys("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")),
			new:         newIdentity(withRequiredKeys("AWS_ACCESS_KEY_ID")),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.requiredKeys", sarRefusal(alice.Username, secretNS, secretName, requiredKeysWhy)}},
			wantDenials: 1,
		},
		{
			name:        "B9 clearing spec.requiredKeys needs the review",
			op:          admissionv1.Update,
			old:         newIdentity(withRequiredKeys("AWS_ACCESS_KEY_ID")),
			new:         newIdentity(),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.requiredKeys", sarRefusal(alice.Username, secretNS, secretName, requiredKeysWhy)}},
			wantDenials: 1,
		},
		{
			name: "B9 reordering spec.requiredKeys (a set) needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(withRequiredKeys("A", "B")),
			new:  newIdentity(withRequiredKeys("B", "A")),
			sar:  sarDeny,
		},
		{
			name: "B9 narrowing with unchanged spec.requiredKeys needs no review",
			op:   admissionv1.Update,
			old:  newIdentity(withRequiredKeys("A")),
			new:  newIdentity(withRequiredKeys("A"), withList("ns-a")),
			sar:  sarDeny,
		},
		{
			name:        "B9 changing spec.requiredKeys and widening at once needs one review, reported at spec.requiredKeys",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withRequiredKeys("A"), withList("ns-a", "ns-b", "ns-c")),
			sar:         sarDeny,
			wantSAR:     &defaultSAR,
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.requiredKeys", sarRefusal(alice.Username, secretNS, secretName, requiredKeysWhy)}},
			wantDenials: 1,
		},
		{
			name:        "B9 changing spec.secretRef and spec.requiredKeys at once needs one review of the new Secret",
			op:          admissionv1.Update,
			old:         newIdentity(),
			new:         newIdentity(withSecret("vault", "gcp-credentials"), withRequiredKeys("A")),
			sar:         sarDeny,
			wantSAR:     ptr(wantSARSpec(alice, "vault", "gcp-credentials")),
			wantErrs:    []wantErr{{field.ErrorTypeForbidden, "spec.secretRef", sarRefusal(alice.Username, "vault", "gcp-credentials", createOrSecretRefWhy)}},
			wantDenials: 1,
		},
		{
			name:         "A5 changing spec.requiredKeys with a failing SubjectAccessReview is an internal error",
			op:           admissionv1.Update,
			old:          newIdentity(),
			new:          newIdentity(withRequiredKeys("A")),
			sar:          sarError,
			wantSAR:      &defaultSAR,
			wantInternal: "the server is currently unable to handle the request",
		},

		// A4: delete.
		{
			name:           "A4 delete while a TerraformMachine uses the identity names it",
			op:             admissionv1.Delete,
			old:            newIdentity(),
			refs:           []index.Ref{{Kind: "TerraformMachine", Namespace: "ns-a", Name: "worker-0"}},
			wantErrs:       []wantErr{{field.ErrorTypeForbidden, "metadata.name", "TerraformClusterIdentity team-a is in use by TerraformMachine ns-a/worker-0; delete or re-point its users first"}},
			wantUsersAsked: []string{identityName},
		},
		{
			name: "A4 delete while several objects use the identity names one, and not how many (B14)",
			op:   admissionv1.Delete,
			old:  newIdentity(),
			refs: []index.Ref{
				{Kind: "TerraformCluster", Namespace: "ns-a", Name: "prod"},
				{Kind: "TerraformMachine", Namespace: "ns-a", Name: "worker-0"},
				{Kind: "TerraformMachinePool", Namespace: "ns-b", Name: "pool-0"},
			},
			wantErrs:       []wantErr{{field.ErrorTypeForbidden, "metadata.name", "TerraformClusterIdentity team-a is in use by TerraformCluster ns-a/prod; delete or re-point its users first"}},
			wantUsersAsked: []string{identityName},
		},
		{
			name: "A4 delete while an object being deleted uses the identity is refused",
			op:   admissionv1.Delete,
			old:  newIdentity(),
			refs: []index.Ref{
				{Kind: "TerraformMachine", Namespace: "ns-a", Name: "worker-0", Deleting: true},
			},
			wantErrs: []wantErr{{field.ErrorTypeForbidden, "metadata.name",
				"TerraformClusterIdentity team-a is in use by TerraformMachine ns-a/worker-0 (being deleted: its destroy needs the credentials); delete or re-point its users first"}},
			wantUsersAsked: []string{identityName},
		},
		{
			name:     "A4 delete while mirrors remain names their namespaces",
			op:       admissionv1.Delete,
			old:      newIdentity(withStatusNamespaces("ns-a", "ns-b")),
			wantErrs: []wantErr{{field.ErrorTypeForbidden, "status.namespaces", mirrorsRemain("ns-a, ns-b")}},
			// Users is asked even so: both reasons are reported at once.
			wantUsersAsked: []string{identityName},
		},
		{
			name:           "A4 delete while mirrors remain in many namespaces names ten and counts the rest",
			op:             admissionv1.Delete,
			old:            newIdentity(withStatusNamespaces(namespaces(12)...)),
			wantErrs:       []wantErr{{field.ErrorTypeForbidden, "status.namespaces", mirrorsRemain(strings.Join(namespaces(10), ", ") + " and 2 more")}},
			wantUsersAsked: []string{identityName},
		},
		{
			name: "A4 delete while in use and mirrored reports both",
			op:   admissionv1.Delete,
			old:  newIdentity(withStatusNamespaces("ns-a")),
			refs: []index.Ref{{Kind: "TerraformMachine", Namespace: "ns-a", Name: "worker-0"}},
			wantErrs: []wantErr{
				{field.ErrorTypeForbidden, "metadata.name", "TerraformClusterIdentity team-a is in use by TerraformMachine ns-a/worker-0; delete or re-point its users first"},
				{field.ErrorTypeForbidden, "status.namespaces", mirrorsRemain("ns-a")},
			},
			wantUsersAsked: []string{identityName},
		},
		{
			name:           "A4 delete of an unused identity without mirrors is allowed, without a review",
			op:             admissionv1.Delete,
			old:            newIdentity(),
			sar:            sarDeny,
			wantUsersAsked: []string{identityName},
		},
		{
			name:           "A5 delete with a failing lookup of users is an internal error",
			op:             admissionv1.Delete,
			old:            newIdentity(),
			usersErr:       errors.New("index captf.io/identity does not exist"),
			wantInternal:   "looking up the users of TerraformClusterIdentity team-a: index captf.io/identity does not exist",
			wantUsersAsked: []string{identityName},
		},
		{
			name:         "A5 delete without the old object fails closed",
			op:           admissionv1.Delete,
			wantInternal: "DELETE request carries no oldObject",
		},

		// A5: requests without the objects they need.
		{
			name:         "A5 create without an object is an internal error",
			op:           admissionv1.Create,
			wantInternal: "CREATE request carries no TerraformClusterIdentity",
		},
		{
			name:         "A5 update without the old object is an internal error",
			op:           admissionv1.Update,
			new:          newIdentity(),
			wantInternal: "UPDATE request lacks the old or the new TerraformClusterIdentity",
		},

		// Other operations.
		{
			name: "CONNECT is allowed without a review or a lookup",
			op:   admissionv1.Connect,
			new:  newIdentity(),
			sar:  sarDeny,
		},
		{
			name: "an operation Kubernetes does not have is allowed without a review or a lookup",
			op:   "PATCH",
			old:  newIdentity(),
			new:  newIdentity(withSecret("vault", "gcp-credentials")),
			sar:  sarDeny,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, logs := bufferedContext(t)
			sar := newFakeSAR(func(authorizationv1.SubjectAccessReviewSpec) sarAnswer { return tc.sar })
			users := &fakeUsers{refs: tc.refs, err: tc.usersErr}
			v := &Validator{SAR: sar.client.AuthorizationV1().SubjectAccessReviews(), Users: users.Users}
			denialsBefore := sarDenials(t)

			errs, err := v.Validate(ctx, alice, tc.op, tc.old, tc.new)

			// The review sent, exactly, or none at all.
			if tc.wantSAR == nil {
				require.Empty(t, sar.client.Actions(), "no SubjectAccessReview (or any other call) expected")
			} else {
				require.Equal(t, []authorizationv1.SubjectAccessReviewSpec{*tc.wantSAR}, sar.reviews())
			}
			require.Equal(t, tc.wantUsersAsked, users.calls(), "Users lookups")
			require.Equal(t, denialsBefore+tc.wantDenials, sarDenials(t), "captf_sar_denials_total")

			if tc.wantInternal != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.wantInternal)
				require.Nil(t, errs, "an internal error comes without field errors")
				require.NotContains(t, err.Error(), canary, "SPEC X1")
				return
			}
			require.NoError(t, err)
			got := make([]wantErr, 0, len(errs))
			for _, e := range errs {
				w := wantErr{typ: e.Type, field: e.Field, detail: e.Detail}
				if e.Type == field.ErrorTypeInvalid {
					w.detail = "" // apimachinery's wording
				}
				got = append(got, w)
				// X1: only names reach the user; never authorizer policy text.
				require.NotContains(t, e.Error(), canary, "SPEC X1")
				require.NotContains(t, e.Error(), policyDetail, "status.reason stays out of the message")
			}
			if len(tc.wantErrs) == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, tc.wantErrs, got)
				// A refusal is logged with user, operation, identity and
				// reason; never with content.
				out := logs.String()
				require.Contains(t, out, "Refused TerraformClusterIdentity request")
				require.Contains(t, out, alice.Username)
				require.Contains(t, out, string(tc.op))
				require.Contains(t, out, identityName)
				require.Contains(t, out, `reason="`+logReason(tc.wantErrs)+`"`)
			}
			require.NotContains(t, logs.String(), canary, "SPEC X1: no content in a log line")
		})
	}
}

// logReason is the reason a refusal with errs is logged with.
func logReason(errs []wantErr) string {
	var reasons []string
	for _, e := range errs {
		switch {
		case e.typ == field.ErrorTypeInvalid:
			reasons = append(reasons, "InvalidSelector")
		case e.field == "metadata.name":
			reasons = append(reasons, "IdentityInUse")
		case e.field == "status.namespaces":
			reasons = append(reasons, "MirrorsRemain")
		default:
			reasons = append(reasons, "SecretAccessDenied")
		}
	}
	return strings.Join(slices.Compact(reasons), ",")
}

func mirrorsRemain(nss string) string {
	return "mirrors of TerraformClusterIdentity team-a remain in namespaces " + nss +
		": the manager removes a mirror once no user there needs it; delete when status.namespaces is empty"
}

func namespaces(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns-%02d", i)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// The review carries the user exactly, including a user with no groups,
// UID or extra (a client certificate user): nothing is invented.
func TestA2ReviewCarriesTheUserExactly(t *testing.T) {
	for name, user := range map[string]authenticationv1.UserInfo{
		"every field":        alice,
		"username only":      {Username: "system:serviceaccount:ci:deployer"},
		"empty extra values": {Username: "bob", Groups: []string{"g"}, Extra: map[string]authenticationv1.ExtraValue{"k": {}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			sar := newFakeSAR(func(authorizationv1.SubjectAccessReviewSpec) sarAnswer { return sarAllow })
			v := &Validator{SAR: sar.client.AuthorizationV1().SubjectAccessReviews()}
			errs, err := v.Validate(ctx, user, admissionv1.Create, nil, newIdentity())
			require.NoError(t, err)
			require.Empty(t, errs)

			want := wantSARSpec(user, secretNS, secretName)
			if len(user.Extra) == 0 {
				want.Extra = nil
			}
			require.Equal(t, []authorizationv1.SubjectAccessReviewSpec{want}, sar.reviews())
		})
	}
}

// The review's Groups and Extra are copies, so nothing done to the review
// (by a client, a retry wrapper or a reactor) reaches the request's user.
// Called directly: the fake clientset hands reactors a deep copy, so an alias
// would not show through it.
func TestA2ReviewDoesNotAliasTheUser(t *testing.T) {
	user := authenticationv1.UserInfo{
		Username: "carol", Groups: []string{"g1"},
		Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}},
	}
	review := subjectAccessReview(user, secretNS, secretName)
	review.Spec.Groups[0] = "changed"
	review.Spec.Extra["k"][0] = "changed"
	require.Equal(t, []string{"g1"}, user.Groups)
	require.Equal(t, authenticationv1.ExtraValue{"v"}, user.Extra["k"])
}

// A5: a Validator missing a client fails closed instead of allowing.
func TestA5MissingClientsFailClosed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	v := &Validator{}
	errs, err := v.Validate(ctx, alice, admissionv1.Create, nil, newIdentity())
	require.ErrorContains(t, err, "no SubjectAccessReview client configured")
	require.Nil(t, errs)

	errs, err = v.Validate(ctx, alice, admissionv1.Update, newIdentity(), newIdentity(withList("ns-a", "ns-b", "ns-c")))
	require.ErrorContains(t, err, "no SubjectAccessReview client configured")
	require.Nil(t, errs)

	errs, err = v.Validate(ctx, alice, admissionv1.Delete, newIdentity(), nil)
	require.ErrorContains(t, err, "no lookup of identity users configured")
	require.Nil(t, errs)

	// Narrowing needs neither client.
	errs, err = v.Validate(ctx, alice, admissionv1.Update, newIdentity(), newIdentity(withList("ns-a")))
	require.NoError(t, err)
	require.Empty(t, errs)
}

// B14: the authorizer's evaluation error and reason stay out of the
// refusal and go to the log, bounded there; a long username is clipped in
// the log.
func TestB14EvaluationErrorLoggedNotReturned(t *testing.T) {
	ctx, logs := bufferedContext(t)
	long := strings.Repeat("é", 400) // multi-byte: the cut must stay valid UTF-8
	sar := newFakeSAR(func(authorizationv1.SubjectAccessReviewSpec) sarAnswer {
		return sarAnswer{evaluationError: "secret-reader-" + long, reason: "policy-x-" + long}
	})
	v := &Validator{SAR: sar.client.AuthorizationV1().SubjectAccessReviews()}
	user := alice
	user.Username = strings.Repeat("u", 1000)
	errs, err := v.Validate(ctx, user, admissionv1.Create, nil, newIdentity())
	require.NoError(t, err)
	require.Len(t, errs, 1)
	require.NotContains(t, errs[0].Detail, "secret-reader")
	require.NotContains(t, errs[0].Detail, "policy-x")
	out := logs.String()
	require.Contains(t, out, "secret-reader-")
	require.Contains(t, out, "policy-x-")
	require.Contains(t, out, "...(truncated)")
	require.NotContains(t, out, strings.Repeat("é", 300), "bounded in the log")
	require.NotContains(t, out, strings.Repeat("u", admission.MaxLoggedNameLen+1), "the username is clipped in the log")
	require.Contains(t, out, strings.Repeat("u", admission.MaxLoggedNameLen)+"...(936 more bytes)")
	require.True(t, utf8.ValidString(out))
}

// TestA4LiveMirrorsRefuseBeforeStatusCatchesUp: status.namespaces lags the
// mirrors by the identity controller's next pass; the live mirror index
// closes that window, and its failure refuses (A5).
func TestA4LiveMirrorsRefuseBeforeStatusCatchesUp(t *testing.T) {
	ctx, _ := bufferedContext(t)
	users := &fakeUsers{}
	v := &Validator{Users: users.Users, Mirrors: func(id string) ([]string, error) {
		require.Equal(t, identityName, id)
		return []string{"ns-b", "ns-a"}, nil
	}}
	errs, err := v.Validate(ctx, alice, admissionv1.Delete, newIdentity(withStatusNamespaces("ns-a")), nil)
	require.NoError(t, err)
	require.Len(t, errs, 1)
	require.Equal(t, "status.namespaces", errs[0].Field)
	require.Contains(t, errs[0].Detail, "remain in namespaces ns-a, ns-b:")

	v.Mirrors = func(string) ([]string, error) { return nil, errors.New("cache not synced") }
	errs, err = v.Validate(ctx, alice, admissionv1.Delete, newIdentity(), nil)
	require.Nil(t, errs)
	require.ErrorContains(t, err, "looking up the mirrors of TerraformClusterIdentity "+identityName)
}
