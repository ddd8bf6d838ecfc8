package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// MaxRequestBodyBytes caps an AdmissionReview body (SPEC X3). The API server
// limits objects to about 1.5 MiB and a review of an update carries two, plus
// the request's metadata.
const MaxRequestBodyBytes = 3 << 20

const (
	// maxRequestTimeout bounds the ?timeout= the API server sends (its
	// webhook timeoutSeconds is at most 30).
	maxRequestTimeout = 30 * time.Second
	// maxEchoLen bounds any client-supplied text (an apiVersion, a content
	// type, a decoder error) echoed in a response or a log line.
	maxEchoLen = 256

	// internalErrorMessage answers a validator that panicked. What the panic
	// was stays in the log: the response goes to the requesting user.
	internalErrorMessage = "internal error"
	// internalErrorPrefix starts the message of an InternalError (SPEC A5).
	internalErrorPrefix = "internal error: "
)

// routeHandler serves one Route: the HTTP checks, the AdmissionReview
// decoding, the route match and the call of the validator.
type routeHandler struct {
	route Route
}

// reply is a handler's answer before it is written, so the decode path can be
// exercised (and fuzzed) without HTTP.
type reply struct {
	// status is the HTTP status: 200 with a JSON AdmissionReview, or an error
	// status with a plain-text message, when no review can be answered.
	status int
	body   []byte
	// operation and result label the metrics.
	operation string
	result    string
}

func plainReply(status int, msg string) reply {
	return reply{status: status, body: []byte(msg + "\n"), operation: operationUnknown, result: resultError}
}

func (h *routeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	logger := klog.FromContext(r.Context()).WithValues("path", h.route.Path, "remoteAddr", r.RemoteAddr)
	ctx := klog.NewContext(r.Context(), logger)

	var rep reply
	func() {
		// The validator has its own recover (admit); this one keeps any other
		// bug from tearing down the connection without an answer.
		defer func() {
			if p := recover(); p != nil {
				logPanic(logger, p)
				rep = plainReply(http.StatusInternalServerError, internalErrorMessage)
			}
		}()
		rep = h.serveHTTP(ctx, w, r)
	}()

	if rep.status == http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
	} else {
		if rep.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", http.MethodPost)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	if _, err := w.Write(rep.body); err != nil {
		logger.V(2).Info("Writing the admission response failed", "err", err)
	}
	requestsTotal.WithLabelValues(rep.operation, rep.result).Inc()
	requestDuration.WithLabelValues(rep.operation).Observe(time.Since(start).Seconds())
}

// serveHTTP checks the HTTP envelope, reads the body and hands it to review.
func (h *routeHandler) serveHTTP(ctx context.Context, w http.ResponseWriter, r *http.Request) reply {
	logger := klog.FromContext(ctx)
	if r.Method != http.MethodPost {
		msg := fmt.Sprintf("method %s not allowed: admission webhooks accept POST only", clip(r.Method))
		logger.Info("Refused admission request", "reason", msg)
		return plainReply(http.StatusMethodNotAllowed, msg)
	}
	contentType := r.Header.Get("Content-Type")
	if mediaType, _, err := mime.ParseMediaType(contentType); err != nil || mediaType != "application/json" {
		msg := fmt.Sprintf("unsupported Content-Type %q: admission webhooks accept application/json only", clip(contentType))
		logger.Info("Refused admission request", "reason", msg)
		return plainReply(http.StatusUnsupportedMediaType, msg)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBodyBytes))
	if err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			msg := fmt.Sprintf("request body too large: admission webhooks accept at most %d bytes (3 MiB)", MaxRequestBodyBytes)
			logger.Info("Refused admission request", "reason", msg, "contentLength", r.ContentLength)
			return plainReply(http.StatusRequestEntityTooLarge, msg)
		}
		msg := fmt.Sprintf("reading request body: %s", clip(err.Error()))
		logger.Info("Refused admission request", "reason", msg)
		return plainReply(http.StatusBadRequest, msg)
	}

	// The API server passes its own deadline for the call; honour it so a
	// slow SubjectAccessReview gives up when nobody waits for the answer. A
	// caller that passes none gets the longest the API server may ask for:
	// no request waits on the webhook's rate limiter for ever (B14).
	timeout := maxRequestTimeout
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		timeout = min(d, maxRequestTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return h.review(ctx, body)
}

// review turns a request body into the reply: decode, match, validate,
// encode. It never panics on any input (FuzzDecode) and only a validator's
// Allow produces allowed=true.
func (h *routeHandler) review(ctx context.Context, body []byte) reply {
	logger := klog.FromContext(ctx)
	refuse := func(msg string) reply {
		logger.Info("Refused malformed admission request", "reason", msg)
		return plainReply(http.StatusBadRequest, msg)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return refuse("request body is empty: expected an admission.k8s.io/v1 AdmissionReview")
	}

	// Read apiVersion and kind first, so that neither a decoder error (which
	// can quote the whole body) nor a kind other than AdmissionReview gets
	// further.
	var typeMeta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(body, &typeMeta); err != nil {
		return refuse(fmt.Sprintf("request body is not a JSON AdmissionReview: %s", clip(err.Error())))
	}
	gvk := schema.FromAPIVersionAndKind(typeMeta.APIVersion, typeMeta.Kind)

	switch gvk {
	case admissionReviewV1:
		review := &admissionv1.AdmissionReview{}
		if _, _, err := jsonSerializer.Decode(body, nil, review); err != nil {
			return refuse(fmt.Sprintf("decoding admission.k8s.io/v1 AdmissionReview: %s", clip(err.Error())))
		}
		return h.reviewV1(ctx, review)

	case admissionReviewV1beta1:
		review := &admissionv1beta1.AdmissionReview{}
		if _, _, err := jsonSerializer.Decode(body, nil, review); err != nil {
			return refuse(fmt.Sprintf("decoding admission.k8s.io/v1beta1 AdmissionReview: %s", clip(err.Error())))
		}
		return h.reviewV1beta1(ctx, review)

	default:
		return refuse(fmt.Sprintf("request body is apiVersion %q kind %q: expected apiVersion %q kind %q",
			clip(typeMeta.APIVersion), clip(typeMeta.Kind), admissionv1.SchemeGroupVersion.String(), "AdmissionReview"))
	}
}

// reviewV1beta1 refuses a v1beta1 review in v1beta1, the version the API
// server expects back, so the refusal and its reason reach the user instead of
// a "wrong response version" error.
func (h *routeHandler) reviewV1beta1(ctx context.Context, review *admissionv1beta1.AdmissionReview) reply {
	var uid types.UID
	op := operationUnknown
	if review.Request != nil {
		uid = review.Request.UID
		op = operationLabel(admissionv1.Operation(review.Request.Operation))
	}
	msg := `admission.k8s.io/v1beta1 AdmissionReview is not supported: set admissionReviewVersions: ["v1"] in the webhook configuration`
	klog.FromContext(ctx).Info("Refused admission request", "uid", ClipName(string(uid)), "reason", msg)
	status := failure(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg)
	out := &admissionv1beta1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1beta1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &admissionv1beta1.AdmissionResponse{UID: uid, Allowed: false, Result: &status},
	}
	return encodeReply(ctx, out, op, resultError)
}

func (h *routeHandler) reviewV1(ctx context.Context, review *admissionv1.AdmissionReview) reply {
	if review.Request == nil {
		// Decodable, so answered with 200; no uid to echo, and the API server
		// never sends this, so whoever did gets a refusal they can read.
		msg := "AdmissionReview has no request"
		klog.FromContext(ctx).Info("Refused admission request", "reason", msg)
		status := failure(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg)
		return encodeReply(ctx, responseV1(&admissionv1.AdmissionResponse{Result: &status}), operationUnknown, resultError)
	}
	uid := review.Request.UID
	resp, result := h.admit(ctx, review.Request)
	// Set after the validator ran, so it cannot change what is echoed.
	resp.UID = uid
	return encodeReply(ctx, responseV1(resp), operationLabel(review.Request.Operation), result)
}

// admit matches req against the route and asks the validator. It returns the
// response (without uid) and the metrics result.
func (h *routeHandler) admit(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	// Only names and identities are logged, never object content (SPEC X1).
	logger := klog.FromContext(ctx).WithValues(
		"uid", ClipName(string(req.UID)),
		"user", ClipName(req.UserInfo.Username),
		"operation", clip(string(req.Operation)),
		"object", klog.KRef(ClipName(req.Namespace), ClipName(req.Name)),
		"resource", clip(gvrString(schema.GroupVersionResource(req.Resource), req.SubResource)),
	)
	ctx = klog.NewContext(ctx, logger)
	refuse := func(code int32, reason metav1.StatusReason, msg string) *admissionv1.AdmissionResponse {
		status := failure(code, reason, msg)
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &status}
	}

	// Match before anything looks at the objects: a validator only ever sees
	// the resource and kind it was written for (SPEC X4).
	route := h.route
	if gotResource := schema.GroupVersionResource(req.Resource); gotResource != route.Resource || req.SubResource != route.SubResource {
		msg := fmt.Sprintf("webhook %s serves %s, got %s",
			route.Path, gvrString(route.Resource, route.SubResource), clip(gvrString(gotResource, req.SubResource)))
		logger.Info("Refused admission request", "reason", msg)
		return refuse(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg), resultError
	}
	if gotKind := schema.GroupVersionKind(req.Kind); gotKind != route.Kind {
		msg := fmt.Sprintf("webhook %s serves kind %s, got kind %s", route.Path, gvkString(route.Kind), clip(gvkString(gotKind)))
		logger.Info("Refused admission request", "reason", msg)
		return refuse(http.StatusBadRequest, metav1.StatusReasonBadRequest, msg), resultError
	}

	res, panicked := callValidator(ctx, route.Validate, req)
	if panicked {
		return refuse(http.StatusInternalServerError, metav1.StatusReasonInternalError, internalErrorMessage), resultError
	}
	if err := res.Err(); err != nil {
		logger.Error(err, "Refused admission request: internal error", "reason", metav1.StatusReasonInternalError)
		return refuse(http.StatusInternalServerError, metav1.StatusReasonInternalError, internalErrorPrefix+err.Error()), resultError
	}
	if res.Allowed() {
		logger.V(4).Info("Allowed admission request", "patched", len(res.Patch()) > 0)
		resp := &admissionv1.AdmissionResponse{Allowed: true, Warnings: res.Warnings()}
		if patch := res.Patch(); len(patch) > 0 {
			patchType := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &patchType
		}
		return resp, resultAllowed
	}

	// Deny: the errors' details go to the user; the log gets field paths and
	// error types only, since a detail may quote a value.
	fields := make([]string, 0, len(res.Errors()))
	for _, e := range res.Errors() {
		fields = append(fields, e.Field+": "+e.Type.String())
	}
	logger.Info("Refused admission request", "reason", metav1.StatusReasonInvalid, "fields", fields)
	status := apierrors.NewInvalid(route.Kind.GroupKind(), req.Name, res.Errors()).ErrStatus
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &status}, resultDenied
}

// callValidator runs validate, turning a panic into panicked=true.
func callValidator(ctx context.Context, validate ValidateFunc, req *admissionv1.AdmissionRequest) (res Result, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(klog.FromContext(ctx), p)
			res, panicked = Result{}, true
		}
	}()
	return validate(ctx, req), false
}

// logPanic logs a recovered panic with its stack. A runtime error's text is
// fixed by the Go runtime and logged; any other panic value may hold object
// content, so only its type is (SPEC X1).
func logPanic(logger klog.Logger, p any) {
	what := fmt.Sprintf("panic value of type %T", p)
	if rerr, ok := p.(goruntime.Error); ok {
		what = rerr.Error()
	}
	logger.Error(nil, "Recovered from a panic while answering an admission request", "panic", what, "stack", string(debug.Stack()))
}

func failure(code int32, reason metav1.StatusReason, msg string) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}
}

func responseV1(resp *admissionv1.AdmissionResponse) *admissionv1.AdmissionReview {
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	}
}

// encodeReply encodes a review for HTTP 200, or falls back to a plain 500 in
// the (theoretical) case it cannot be encoded.
func encodeReply(ctx context.Context, review runtime.Object, operation, result string) reply {
	var buf bytes.Buffer
	if err := jsonSerializer.Encode(review, &buf); err != nil {
		klog.FromContext(ctx).Error(err, "Encoding the AdmissionReview response failed")
		rep := plainReply(http.StatusInternalServerError, internalErrorMessage+": cannot encode the AdmissionReview response")
		rep.operation = operation
		return rep
	}
	return reply{status: http.StatusOK, body: buf.Bytes(), operation: operation, result: result}
}

// clip bounds client-supplied text before it is echoed or logged.
func clip(s string) string {
	if len(s) <= maxEchoLen {
		return s
	}
	return s[:maxEchoLen] + "...(truncated)"
}
