package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// FuzzDecode feeds arbitrary bodies to the decode path (review) and checks
// SPEC X3 and X4 on every outcome: no panic, a 200 always carries a response
// with the request's uid, and allowed=true only ever follows a validator's
// Allow.
func FuzzDecode(f *testing.F) {
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
		for _, name := range []string{"ok", "deny", "panic", "error", "undecided"} {
			f.Add(reviewJSON(f, identityRequest(f, op, name)))
		}
	}
	wrongKind := identityRequest(f, admissionv1.Create, "ok")
	wrongKind.Resource.Resource = "terraformclusters"
	f.Add(reviewJSON(f, wrongKind))
	for _, seed := range []string{
		``,
		`null`,
		`{}`,
		`[]`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":5}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true}}`,
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","name":"ok"}}`,
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}`,
		`{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"}`,
		`{"apiVersion":"a/b/c","kind":"AdmissionReview"}`,
		`{"apiVersion":"v1","kind":"Secret","data":{"k":"dmFsdWU="}}`,
		"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n",
		`{"apiVersion":"admission.k8s.io/v1","apiVersion":"v1","kind":"AdmissionReview"}`,
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		var calls, allows int
		h := &routeHandler{route: identityRoute(func(_ context.Context, req *admissionv1.AdmissionRequest) Result {
			calls++
			if _, _, err := DecodeObjects[v1alpha1.TerraformClusterIdentity](req); err != nil {
				return InternalError(err)
			}
			switch req.Name {
			case "ok":
				allows++
				return Allow("fine")
			case "panic":
				panic("validator bug")
			case "error":
				return InternalError(errors.New("list failed"))
			case "undecided":
				return Result{}
			}
			return Deny(field.ErrorList{field.Forbidden(field.NewPath("metadata", "name"), "not ok")})
		})}
		ctx := klog.NewContext(context.Background(), logr.Discard())

		rep := h.review(ctx, body)

		require := func(cond bool, format string, args ...any) {
			t.Helper()
			if !cond {
				t.Fatalf(format+"\ninput: %q\nreply: %d %q", append(args, body, rep.status, rep.body)...)
			}
		}
		require(rep.result == resultAllowed || rep.result == resultDenied || rep.result == resultError, "result label %q", rep.result)
		switch rep.operation {
		case operationUnknown, "CREATE", "UPDATE", "DELETE", "CONNECT":
		default:
			require(false, "operation label %q is not bounded", rep.operation)
		}
		if rep.status != http.StatusOK {
			require(rep.status == http.StatusBadRequest, "status %d", rep.status)
			require(calls == 0, "a refused body reached the validator")
			require(rep.result == resultError, "result %q for status %d", rep.result, rep.status)
			return
		}

		var typeMeta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Response   *struct {
				UID     string `json:"uid"`
				Allowed bool   `json:"allowed"`
			} `json:"response"`
		}
		require(json.Unmarshal(rep.body, &typeMeta) == nil, "200 body is not JSON")
		require(typeMeta.Kind == "AdmissionReview", "200 body kind %q", typeMeta.Kind)
		require(typeMeta.Response != nil, "200 body without a response")
		require(typeMeta.Response.Allowed == (rep.result == resultAllowed), "allowed=%v but result label %q", typeMeta.Response.Allowed, rep.result)
		if typeMeta.Response.Allowed {
			require(allows == 1, "allowed without the validator allowing (calls %d, allows %d)", calls, allows)
		}
		switch typeMeta.APIVersion {
		case "admission.k8s.io/v1beta1":
			require(calls == 0, "a v1beta1 review reached the validator")
		case "admission.k8s.io/v1":
			in := &admissionv1.AdmissionReview{}
			if _, _, err := jsonSerializer.Decode(body, nil, in); err == nil && in.Request != nil {
				require(typeMeta.Response.UID == string(in.Request.UID), "uid %q not echoed, got %q", in.Request.UID, typeMeta.Response.UID)
			}
		default:
			require(false, "200 body apiVersion %q", typeMeta.APIVersion)
		}
	})
}
