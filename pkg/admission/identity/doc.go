// Package identity validates TerraformClusterIdentity requests in the
// admission webhook: the rules that need the requesting user or other objects
// and so cannot live in the CRD's CEL (SPEC section 8).
//
// Validator.Validate is a plain function of (user, operation, old object, new
// object) tested without HTTP; Validator.Route plugs it into the
// pkg/admission server at Path.
//
// SPEC rules owned here:
//
//   - A1, the part CEL cannot do: on CREATE and UPDATE the label keys and
//     values of spec.allowedNamespaces.selector must be valid
//     (metav1validation.ValidateLabelSelector). On UPDATE the check ratchets:
//     a selector equal to the stored one is not re-checked, so an identity
//     admitted before this check existed can still be narrowed or have its
//     selector removed (revocation must always be possible).
//   - A2: CREATE needs a SubjectAccessReview allowing the requesting user
//     (username, UID, groups, extra) to get the Secret spec.secretRef names.
//   - A3: UPDATE needs the same review when spec.secretRef changes or
//     spec.allowedNamespaces widens (credentials.Widens). Narrowing, and
//     metadata-only edits, need none, so whoever may edit the identity can
//     always revoke, even without read access to the Secret.
//   - B9: UPDATE needs the same review when the set spec.requiredKeys
//     changes (adding or removing a key; not a reordering): the identity's
//     CredentialsIncomplete condition names the required keys the Secret
//     lacks, so whoever may choose the keys may probe the Secret's key names.
//   - A4: DELETE is refused while a workload object resolves to the identity
//     (objects being deleted count: their destroy Job needs the credentials),
//     naming one of them (found from the informers' indexes at the cost of
//     the identity's users, B13), and while status.namespaces lists namespaces that
//     still hold a mirror, naming them. Both reasons are reported together.
//   - A5: a failed SubjectAccessReview, a failed lookup of users, a missing
//     client, or a request without the object it needs is an internal error:
//     refused, never allowed.
//   - X1: messages and log lines carry names only (user, Secret
//     namespace/name, identity, workload objects, namespaces); the webhook
//     never reads a Secret, so it has no content to leak.
//
// Decisions (see also the comments at each):
//
//   - A1 is checked before any SubjectAccessReview; a request with an invalid
//     selector is refused with the A1 errors alone and costs no review (it
//     cannot be admitted whatever the review says).
//   - Refusals say no more than the seeds require (B14). A denied review's
//     status.reason and status.evaluationError are not put into the refusal
//     message: an authorizer may write arbitrary text there (names of
//     policies, of Roles in the Secret's namespace, of other subjects), and
//     the message goes to the requesting user. Both are logged for the
//     operator instead, bounded in length. An A4 refusal names one object
//     using the identity, not how many there are across namespaces.
//   - Usernames and identity names in log lines are clipped
//     (admission.ClipName, B14).
//   - Changing spec.secretRef and widening in the same update needs one
//     review (the new Secret), reported at spec.secretRef. Changing
//     spec.requiredKeys and widening in the same update needs one review,
//     reported at spec.requiredKeys.
//   - CONNECT and any other operation are allowed: the webhook configuration
//     does not send them, and they carry no identity to check.
package identity
