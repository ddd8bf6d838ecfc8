// Package plan is the admission of TerraformPlans (SPEC O8; upstream
// A3-67, A5-19): who may create a plan, change its spec, or approve it, and
// who approved it. It is served on a mutating webhook because approval
// writes spec.approvedBy from the request's user: the value is never taken
// from the request.
//
//   - Create: only the manager (the user the webhook's own client
//     authenticates as, learnt once with a SelfSubjectReview) creates plans,
//     unapproved and without approvedBy.
//   - Update: spec.approvedBy may not be written by anyone, except that an
//     approval may carry the requester's own username (upstream A1-143,
//     A3-67: "must equal requester"; the patch below writes that same
//     value, so nothing taken from the request is stored); spec fields
//     other than spec.approved may be changed only by the manager, and not
//     on an approved plan.
//   - Approval (spec.approved false -> true): the requester must be allowed
//     the verb approve on the plan (a SubjectAccessReview for the request's
//     user: an RBAC decision, the ClusterRole captf-plan-approver), and may
//     not be the manager; the webhook then patches spec.approvedBy to the
//     requester's username.
//
// The CRD's CEL holds what needs no user: targetRef immutable, approval set
// once, an approved plan's spec immutable, approvedBy exactly on approved
// plans. Messages name users and fields, never values of other objects (X1).
package plan
