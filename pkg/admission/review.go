package admission

import (
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// SubjectAccessReviewFor returns a SubjectAccessReview of user (username,
// UID, groups and extra, copied) with no attributes yet: the webhook (A2,
// A3, B9) and /metrics (B4) ask about the same whole identity, each with
// its own resource or non-resource attributes.
func SubjectAccessReviewFor(user authenticationv1.UserInfo) *authorizationv1.SubjectAccessReview {
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(slices.Clone(v))
		}
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user.Username,
		UID:    user.UID,
		Groups: slices.Clone(user.Groups),
		Extra:  extra,
	}}
}
