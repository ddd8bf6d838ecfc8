package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateFunc decides one admission request that already matched its
// Route's resource and kind. Decode the objects with DecodeObjects. ctx
// carries the request's deadline (the API server's timeout) and a logger with
// the request's uid, user, operation and object.
//
// Field errors are returned to the requesting user and their field paths are
// logged: never put a Secret value (or anything else the user may not read)
// into one (SPEC X1); prefer field.Forbidden or field.Required, or
// field.Invalid with a value the user supplied themselves.
type ValidateFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) Result

// Route binds a URL path of the webhook server to the validator of one
// resource. Every field is required except SubResource.
type Route struct {
	// Path is the URL path the webhook configuration's clientConfig names,
	// for example "/validate-terraformclusteridentity". Matched exactly.
	Path string
	// Resource is the resource the webhook configuration sends to Path, in
	// the version it is registered for (the API server converts to it).
	Resource schema.GroupVersionResource
	// SubResource is the subresource served, "" for the main resource. A
	// request for any other subresource (say "status") is refused, so a
	// widened webhook configuration cannot feed the validator objects it was
	// not written for.
	SubResource string
	// Kind is the kind of the objects of Resource; DecodeObject and the
	// Invalid status of a refusal use it.
	Kind schema.GroupVersionKind
	// Validate decides the requests that match Resource, SubResource and Kind.
	Validate ValidateFunc
}

func (r Route) validate() error {
	var errs []error
	switch {
	case !strings.HasPrefix(r.Path, "/"):
		errs = append(errs, fmt.Errorf("path %q does not start with /", r.Path))
	case strings.HasSuffix(r.Path, "/"):
		// A trailing slash would make net/http match a whole subtree.
		errs = append(errs, fmt.Errorf("path %q ends with /", r.Path))
	case strings.ContainsAny(r.Path, "{}% \t\r\n?#"):
		// net/http.ServeMux would read these as a pattern, an escape, a
		// method or a query, or panic on them.
		errs = append(errs, fmt.Errorf("path %q contains a pattern, escape, space, query or fragment character", r.Path))
	}
	if r.Resource.Version == "" || r.Resource.Resource == "" {
		errs = append(errs, fmt.Errorf("route %s: resource %q lacks a version or resource", r.Path, gvrString(r.Resource, "")))
	}
	if r.Kind.Version == "" || r.Kind.Kind == "" {
		errs = append(errs, fmt.Errorf("route %s: kind %q lacks a version or kind", r.Path, gvkString(r.Kind)))
	}
	if r.Validate == nil {
		errs = append(errs, fmt.Errorf("route %s: no Validate func", r.Path))
	}
	return errors.Join(errs...)
}

// Result is a validator's decision. Build it with Allow, Deny or
// InternalError. The zero Result is not an allow: the server treats it as an
// internal error, so a validator that forgets to decide refuses (SPEC X4).
type Result struct {
	decided  bool
	allowed  bool
	invalid  field.ErrorList
	err      error
	warnings []string
	// patch is a JSON Patch (RFC 6902) the API server applies to the
	// object; only a mutating webhook configuration may send one.
	patch []byte
}

// Allow admits the request, with optional warnings shown to the client.
func Allow(warnings ...string) Result {
	return Result{decided: true, allowed: true, warnings: warnings}
}

// AllowWithPatch admits the request with patch, a JSON Patch (RFC 6902)
// the API server applies to the object before it is validated and stored.
// Only routes that a MutatingWebhookConfiguration calls may use it.
func AllowWithPatch(patch []byte, warnings ...string) Result {
	return Result{decided: true, allowed: true, warnings: warnings, patch: patch}
}

// Deny refuses the request because of errs: the response carries HTTP-like
// code 422 and reason Invalid, with the aggregated errors as its message, as
// the API server's own validation does. Deny with no errors is a validator
// bug and is answered as an internal error, never as an allow.
func Deny(errs field.ErrorList) Result {
	return Result{decided: true, invalid: errs}
}

// InternalError refuses the request because the validator could not decide,
// for example a failed SubjectAccessReview or list (SPEC A5): code 500,
// message "internal error: " followed by err's text.
func InternalError(err error) Result {
	if err == nil {
		err = errors.New("validator reported an internal error without detail")
	}
	return Result{decided: true, err: err}
}

// Allowed reports whether r admits the request.
func (r Result) Allowed() bool { return r.decided && r.allowed }

// Errors returns the field errors of a Deny.
func (r Result) Errors() field.ErrorList { return r.invalid }

// Err returns the error of an InternalError, or describes why r is not a
// decision the server can act on (a zero Result, or Deny without errors).
func (r Result) Err() error {
	switch {
	case !r.decided:
		return errors.New("validator returned no decision")
	case r.err != nil:
		return r.err
	case !r.allowed && len(r.invalid) == 0:
		return errors.New("validator refused without a reason")
	}
	return nil
}

// Warnings returns the warnings of an Allow.
func (r Result) Warnings() []string { return r.warnings }

// Patch returns the JSON Patch of an AllowWithPatch, nil for none.
func (r Result) Patch() []byte { return r.patch }
