// Package admission is the captf admission webhook server: plain net/http
// over crypto/tls, the decoding and answering of admission.k8s.io/v1
// AdmissionReviews, and the seam where per-kind validators plug in. The
// validators that need a request's user or other objects (SPEC A2-A4) live
// elsewhere and reach the server as Routes; everything the CRD schema can say
// stays in the CRD (SPEC section 8).
//
// SPEC rules owned here:
//
//   - X3: TLS 1.2 or later only; the certificate is reloaded when tls.crt or
//     tls.key change on disk (in place, or by the atomic ..data symlink swap
//     of a Secret volume), polled every Options.CertReloadInterval, the last
//     good certificate kept in service and the failure reported by
//     Server.Healthz; bodies capped at MaxRequestBodyBytes (3 MiB); every
//     decodable AdmissionReview is answered with HTTP 200 and its request uid.
//   - X4: a malformed review, a review for another resource or kind than the
//     route serves, an oversized body, a validator that panics or forgets to
//     decide: each gets a clear refusal, never a panic or an allow. Only a
//     validator's Allow (or AllowWithPatch) produces allowed=true.
//   - A5, in part: a validator's InternalError (a failed SubjectAccessReview
//     or list) is refused with code 500 and "internal error: <cause>".
//   - X1, in part: log lines carry the user, operation, resource and object
//     name, never object content; refusal logs name field paths, not values.
//   - B14, in part: with Options.ClientCAFile the server requires a client
//     certificate that CA signed (tls.RequireAndVerifyClientCert; the CA
//     file is reloaded like the serving certificate), so only the API
//     server, which presents one when its AdmissionConfiguration says so,
//     reaches a validator. Usernames, object names and request UIDs in log
//     lines are clipped (ClipName); net/http's own error lines are rate
//     limited; every request has a deadline (the API server's ?timeout=,
//     else the longest it may ask for), so none waits on a validator's
//     rate-limited client for ever.
//
// How each kind of request is answered:
//
//	not POST                             405, plain text
//	Content-Type not application/json    415, plain text
//	body over 3 MiB                      413, plain text
//	empty, not JSON, not an
//	AdmissionReview, undecodable         400, plain text (no review to answer)
//	v1beta1 AdmissionReview              200, v1beta1 response, allowed=false, code 400, uid echoed
//	v1 AdmissionReview without request   200, allowed=false, code 400
//	wrong resource, subresource or kind  200, allowed=false, code 400, uid echoed
//	validator Deny(field errors)         200, allowed=false, code 422, reason Invalid
//	validator InternalError, zero Result 200, allowed=false, code 500, "internal error: ..."
//	validator panic                      200, allowed=false, code 500, "internal error"
//	validator Allow                      200, allowed=true (with warnings)
//	validator AllowWithPatch             200, allowed=true, patchType JSONPatch, patch
//
// Metrics (legacyregistry): captf_admission_requests_total{operation,result},
// captf_admission_request_duration_seconds{operation}, and
// captf_sar_denials_total, counted by the identity validator through
// RecordSARDenial.
package admission
