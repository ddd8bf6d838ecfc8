package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// countingValidator counts its calls and returns decide's result.
func countingValidator(calls *atomic.Int32, decide func(ctx context.Context, req *admissionv1.AdmissionRequest) Result) ValidateFunc {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) Result {
		calls.Add(1)
		return decide(ctx, req)
	}
}

func TestX3AllowEchoesUID(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := startServer(t, identityRoute(countingValidator(&calls, func(_ context.Context, req *admissionv1.AdmissionRequest) Result {
		oldObj, obj, err := DecodeObjects[v1alpha1.TerraformClusterIdentity](req)
		if err != nil {
			return InternalError(err)
		}
		if oldObj != nil || obj == nil || obj.Spec.SecretRef.Name != "aws-credentials" {
			return InternalError(errors.New("the validator did not get the object it was sent"))
		}
		return Allow("identity team-a is new")
	})))

	req := identityRequest(t, admissionv1.Create, "team-a")
	resp := ts.review(t, identityPath, req)
	require.True(t, resp.Allowed, "result: %+v", resp.Result)
	require.Equal(t, []string{"identity team-a is new"}, resp.Warnings)
	require.EqualValues(t, 1, calls.Load())

	// The media type may carry parameters.
	httpResp, body := ts.do(t, http.MethodPost, identityPath, "application/json; charset=utf-8", reviewJSON(t, req))
	require.Equal(t, http.StatusOK, httpResp.StatusCode, "body: %s", body)
	require.True(t, decodeResponseV1(t, body).Allowed)
}

func TestX4DenyWithFieldErrorsIsInvalid(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result {
		return Deny(field.ErrorList{
			field.Forbidden(field.NewPath("spec", "secretRef"), `user "alice@example.com" cannot get Secret captf-system/aws-credentials`),
		})
	}))

	resp := ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-a"))
	require.False(t, resp.Allowed)
	require.NotNil(t, resp.Result)
	require.Equal(t, metav1.StatusFailure, resp.Result.Status)
	require.EqualValues(t, http.StatusUnprocessableEntity, resp.Result.Code)
	require.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
	require.Equal(t, `TerraformClusterIdentity.infrastructure.cluster.x-k8s.io "team-a" is invalid: `+
		`spec.secretRef: Forbidden: user "alice@example.com" cannot get Secret captf-system/aws-credentials`, resp.Result.Message)
	require.NotNil(t, resp.Result.Details)
	require.Equal(t, "spec.secretRef", resp.Result.Details.Causes[0].Field)

	// The refusal is logged with who, what and why, but only field paths.
	logs := ts.logs.String()
	require.Contains(t, logs, "Refused admission request")
	require.Contains(t, logs, "alice@example.com")
	require.Contains(t, logs, "spec.secretRef: Forbidden")
	require.Contains(t, logs, "team-a")
}

func TestA5InternalErrorRefusesWith500(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result {
		return InternalError(errors.New("creating SubjectAccessReview: connection refused"))
	}))

	resp := ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-a"))
	require.False(t, resp.Allowed)
	require.EqualValues(t, http.StatusInternalServerError, resp.Result.Code)
	require.Equal(t, metav1.StatusReasonInternalError, resp.Result.Reason)
	require.Equal(t, "internal error: creating SubjectAccessReview: connection refused", resp.Result.Message)
}

func TestX4UndecidedValidatorRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		result  Result
		message string
	}{
		"zero Result":          {Result{}, "internal error: validator returned no decision"},
		"Deny without errors":  {Deny(nil), "internal error: validator refused without a reason"},
		"InternalError of nil": {InternalError(nil), "internal error: validator reported an internal error without detail"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return tc.result }))
			resp := ts.review(t, identityPath, identityRequest(t, admissionv1.Update, "team-a"))
			require.False(t, resp.Allowed)
			require.EqualValues(t, http.StatusInternalServerError, resp.Result.Code)
			require.Equal(t, tc.message, resp.Result.Message)
		})
	}
}

func TestX4MalformedReviewIsBadRequest(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := startServer(t, identityRoute(countingValidator(&calls, func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })))

	for name, tc := range map[string]struct {
		body    string
		message string
	}{
		"empty body":       {"", "request body is empty"},
		"truncated JSON":   {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1"`, "request body is not a JSON AdmissionReview"},
		"JSON array":       {`[1,2,3]`, "request body is not a JSON AdmissionReview"},
		"no kind":          {`{"request":{"uid":"1"}}`, `request body is apiVersion "" kind "": expected apiVersion "admission.k8s.io/v1" kind "AdmissionReview"`},
		"another kind":     {`{"apiVersion":"v1","kind":"Secret","data":{"key":"` + secretValue + `"}}`, `request body is apiVersion "v1" kind "Secret"`},
		"a captf object":   {`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformClusterIdentity"}`, `kind "TerraformClusterIdentity": expected`},
		"wrong field type": {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":5}`, "decoding admission.k8s.io/v1 AdmissionReview"},
		"YAML":             {"apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n", "request body is not a JSON AdmissionReview"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := ts.do(t, http.MethodPost, identityPath, "application/json", []byte(tc.body))
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "body: %s", body)
			require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			require.Contains(t, string(body), tc.message)
		})
	}
	require.Zero(t, calls.Load(), "no validator may see a malformed review")
}

func TestX4WrongContentTypeIsUnsupported(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	body := reviewJSON(t, identityRequest(t, admissionv1.Create, "team-a"))

	for _, contentType := range []string{"", "text/plain", "application/yaml", "application/vnd.kubernetes.protobuf", "application/json-patch+json", "application/json;;"} {
		resp, data := ts.do(t, http.MethodPost, identityPath, contentType, body)
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "Content-Type %q: %s", contentType, data)
		require.Contains(t, string(data), "accept application/json only")
	}
	resp, data := ts.do(t, http.MethodPost, identityPath, "Application/JSON", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "media types are case-insensitive: %s", data)
}

func TestX4MethodOtherThanPostIsNotAllowed(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		resp, body := ts.do(t, method, identityPath, "application/json", nil)
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s: %s", method, body)
		require.Equal(t, http.MethodPost, resp.Header.Get("Allow"))
		require.Contains(t, string(body), "accept POST only")
	}
	resp, _ := ts.do(t, http.MethodPost, "/no-such-webhook", "application/json", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestX3OversizedBodyIsTooLarge(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := startServer(t, identityRoute(countingValidator(&calls, func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })))

	// A valid review padded to exactly the limit is served...
	req := identityRequest(t, admissionv1.Create, "team-a")
	atLimit := reviewJSON(t, req)
	atLimit = append(atLimit, bytes.Repeat([]byte(" "), MaxRequestBodyBytes-len(atLimit))...)
	require.Len(t, atLimit, MaxRequestBodyBytes)
	resp, body := ts.do(t, http.MethodPost, identityPath, "application/json", atLimit)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, decodeResponseV1(t, body).Allowed)
	require.EqualValues(t, 1, calls.Load())

	// ...one byte more is not, whether or not it would decode.
	resp, body = ts.do(t, http.MethodPost, identityPath, "application/json", append(atLimit, ' '))
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, string(body), "request body too large: admission webhooks accept at most 3145728 bytes (3 MiB)")
	require.EqualValues(t, 1, calls.Load())

	// The server still answers afterwards.
	require.True(t, ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-b")).Allowed)
}

func TestX4WrongResourceOrKindIsRefusedBeforeValidation(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := startServer(t, identityRoute(countingValidator(&calls, func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })))

	for name, tc := range map[string]struct {
		mutate  func(*admissionv1.AdmissionRequest)
		message string
	}{
		"another resource": {
			func(r *admissionv1.AdmissionRequest) {
				r.Resource = metav1.GroupVersionResource(clusterGVR)
				r.Kind = metav1.GroupVersionKind(clusterGVK)
			},
			"webhook /validate-terraformclusteridentity serves infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusteridentities, got infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusters",
		},
		"a core resource": {
			func(r *admissionv1.AdmissionRequest) {
				r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}
			},
			"serves infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusteridentities, got v1/secrets",
		},
		"another version": {
			func(r *admissionv1.AdmissionRequest) { r.Resource.Version = "v1beta1" },
			"got infrastructure.cluster.x-k8s.io/v1beta1/terraformclusteridentities",
		},
		"a subresource": {
			func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" },
			"got infrastructure.cluster.x-k8s.io/v1alpha1/terraformclusteridentities/status",
		},
		"another kind": {
			func(r *admissionv1.AdmissionRequest) { r.Kind = metav1.GroupVersionKind(clusterGVK) },
			"webhook /validate-terraformclusteridentity serves kind infrastructure.cluster.x-k8s.io/v1alpha1 TerraformClusterIdentity, got kind infrastructure.cluster.x-k8s.io/v1alpha1 TerraformCluster",
		},
	} {
		t.Run(name, func(t *testing.T) {
			req := identityRequest(t, admissionv1.Create, "team-a")
			tc.mutate(req)
			resp := ts.review(t, identityPath, req)
			require.False(t, resp.Allowed)
			require.EqualValues(t, http.StatusBadRequest, resp.Result.Code)
			require.Equal(t, metav1.StatusReasonBadRequest, resp.Result.Reason)
			require.Contains(t, resp.Result.Message, tc.message)
		})
	}
	require.Zero(t, calls.Load(), "the validator must only see its own resource and kind")
}

func TestX4AdmissionReviewV1beta1IsRefusedInV1beta1(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := startServer(t, identityRoute(countingValidator(&calls, func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })))

	v1req := identityRequest(t, admissionv1.Create, "team-a")
	body, err := json.Marshal(&admissionv1beta1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1beta1", Kind: "AdmissionReview"},
		Request: &admissionv1beta1.AdmissionRequest{
			UID: v1req.UID, Kind: v1req.Kind, Resource: v1req.Resource, Name: v1req.Name,
			Operation: admissionv1beta1.Create, Object: v1req.Object,
		},
	})
	require.NoError(t, err)

	resp, data := ts.do(t, http.MethodPost, identityPath, "application/json", body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", data)
	var out admissionv1beta1.AdmissionReview
	require.NoError(t, json.Unmarshal(data, &out))
	require.Equal(t, "admission.k8s.io/v1beta1", out.APIVersion, "answered in the version asked, so the API server shows the reason")
	require.NotNil(t, out.Response)
	require.Equal(t, v1req.UID, out.Response.UID)
	require.False(t, out.Response.Allowed)
	require.EqualValues(t, http.StatusBadRequest, out.Response.Result.Code)
	require.Contains(t, out.Response.Result.Message, `set admissionReviewVersions: ["v1"]`)
	require.Zero(t, calls.Load())
}

func TestX4ReviewWithoutRequestIsRefused(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := startServer(t, identityRoute(countingValidator(&calls, func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })))

	resp, data := ts.do(t, http.MethodPost, identityPath, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	require.Equal(t, http.StatusOK, resp.StatusCode, "a decodable review is answered with 200: %s", data)
	out := decodeResponseV1(t, data)
	require.False(t, out.Allowed)
	require.Empty(t, out.UID)
	require.EqualValues(t, http.StatusBadRequest, out.Result.Code)
	require.Equal(t, "AdmissionReview has no request", out.Result.Message)
	require.Zero(t, calls.Load())
}

func TestX4ValidatorPanicRefusesAndServerKeepsServing(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(_ context.Context, req *admissionv1.AdmissionRequest) Result {
		switch req.Name {
		case "panic-value":
			// A panic value may carry object content; it must not be logged.
			panic(fmt.Sprintf("unexpected annotation %s", secretValue))
		case "panic-runtime":
			var m map[string]string
			m[req.Name] = "boom" // assignment to entry in nil map
		case "panic-abort":
			panic(http.ErrAbortHandler)
		}
		return Allow()
	}))

	for _, name := range []string{"panic-value", "panic-runtime", "panic-abort"} {
		resp := ts.review(t, identityPath, identityRequest(t, admissionv1.Create, name))
		require.False(t, resp.Allowed, name)
		require.EqualValues(t, http.StatusInternalServerError, resp.Result.Code, name)
		require.Equal(t, metav1.StatusReasonInternalError, resp.Result.Reason, name)
		require.Equal(t, "internal error", resp.Result.Message, name)
		// Still serving.
		require.True(t, ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "fine")).Allowed)
	}
	logs := ts.logs.String()
	require.Contains(t, logs, "Recovered from a panic")
	require.Contains(t, logs, "assignment to entry in nil map", "runtime errors are logged verbatim")
	require.Contains(t, logs, "panic value of type string")
}

func TestX3ValidatorGetsTheAPIServerTimeout(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(ctx context.Context, _ *admissionv1.AdmissionRequest) Result {
		deadline, ok := ctx.Deadline()
		if !ok {
			return InternalError(errors.New("no deadline"))
		}
		if time.Until(deadline) > maxRequestTimeout {
			return InternalError(fmt.Errorf("deadline %s away, above the cap", time.Until(deadline)))
		}
		return Allow()
	}))
	for _, query := range []string{"?timeout=10s", "?timeout=10m", "", "?timeout=bogus"} {
		req := identityRequest(t, admissionv1.Create, "team-a")
		resp := ts.review(t, identityPath+query, req)
		require.True(t, resp.Allowed, "query %q: %+v", query, resp.Result)
	}
}

func TestX3TLSBelow12IsRefused(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	addr := ts.srv.Addr().String()

	for _, version := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{
			InsecureSkipVerify: true, //nolint:gosec // only the protocol version is under test
			MinVersion:         version,
			MaxVersion:         version,
		})
		if err == nil {
			conn.Close()
		}
		require.Error(t, err, "%s must be refused", tls.VersionName(version))
	}
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{
			InsecureSkipVerify: true, //nolint:gosec // only the protocol version is under test
			MinVersion:         version,
			MaxVersion:         version,
			NextProtos:         []string{"h2", "http/1.1"},
		})
		require.NoError(t, err, tls.VersionName(version))
		defer conn.Close()
		require.Equal(t, version, conn.ConnectionState().Version)
		require.Equal(t, "http/1.1", conn.ConnectionState().NegotiatedProtocol, "HTTP/2 is not offered")
	}
}

func TestX3CertificateReloadInPlace(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	addr := ts.srv.Addr().String()
	first, err := servedCert(t, addr, ts.caPEM)
	require.NoError(t, err)

	caPEM, certPEM, keyPEM, err := certs.Generate([]string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	want := leafOf(t, certPEM).SerialNumber
	require.NotEqual(t, first.SerialNumber, want)
	// Rewrite the files themselves, key first so no poll sees a new
	// certificate with the old key for long.
	require.NoError(t, os.WriteFile(filepath.Join(ts.dir, certs.KeyFileName), keyPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ts.dir, certs.CertFileName), certPEM, 0o644))

	eventually(t, "new certificate served after an in-place rewrite", func() error {
		got, err := servedCert(t, addr, ts.caPEM, caPEM)
		if err != nil {
			return err
		}
		if got.SerialNumber.Cmp(want) != 0 {
			return fmt.Errorf("serving serial %s, want %s", got.SerialNumber, want)
		}
		return nil
	})
	require.NoError(t, ts.srv.Healthz())
	// Clients that trust only the new CA now verify the server.
	served, err := servedCert(t, addr, caPEM)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", served.Subject.CommonName)
}

// writeSecretVolume lays dir out like the kubelet's atomic writer for a Secret
// volume: files in a timestamped directory, ..data pointing at it, and
// tls.crt and tls.key symlinks through ..data. Each call swaps ..data
// atomically to a new directory and removes the previous one.
func writeSecretVolume(t *testing.T, dir string, generation int, certPEM, keyPEM []byte) {
	t.Helper()
	tsDir := fmt.Sprintf("..2026_01_02_03_04_05.%09d", generation)
	require.NoError(t, os.Mkdir(filepath.Join(dir, tsDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, tsDir, certs.CertFileName), certPEM, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, tsDir, certs.KeyFileName), keyPEM, 0o600))

	dataLink := filepath.Join(dir, "..data")
	previous, _ := os.Readlink(dataLink)
	require.NoError(t, os.Symlink(tsDir, filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), dataLink))
	for _, name := range []string{certs.CertFileName, certs.KeyFileName} {
		if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
		}
	}
	if previous != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, previous)))
	}
}

func TestX3CertificateReloadSecretVolumeSymlinkSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caPEM1, certPEM1, keyPEM1, err := certs.Generate([]string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	writeSecretVolume(t, dir, 1, certPEM1, keyPEM1)
	ts := startServerIn(t, dir, caPEM1, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	addr := ts.srv.Addr().String()

	got, err := servedCert(t, addr, caPEM1)
	require.NoError(t, err)
	require.Equal(t, 0, got.SerialNumber.Cmp(leafOf(t, certPEM1).SerialNumber))
	require.True(t, ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-a")).Allowed)

	caPEM2, certPEM2, keyPEM2, err := certs.Generate([]string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	want := leafOf(t, certPEM2).SerialNumber
	writeSecretVolume(t, dir, 2, certPEM2, keyPEM2)

	eventually(t, "new certificate served after the ..data swap", func() error {
		got, err := servedCert(t, addr, caPEM1, caPEM2)
		if err != nil {
			return err
		}
		if got.SerialNumber.Cmp(want) != 0 {
			return fmt.Errorf("serving serial %s, want %s", got.SerialNumber, want)
		}
		return nil
	})
	require.NoError(t, ts.srv.Healthz())
	_, err = servedCert(t, addr, caPEM1)
	require.Error(t, err, "the old CA no longer verifies: the old certificate is gone")
}

func TestX3HealthzReportsUnloadableCertificateAndRecovers(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	addr := ts.srv.Addr().String()
	require.NoError(t, ts.srv.Healthz())
	certFile := filepath.Join(ts.dir, certs.CertFileName)
	goodCert, err := os.ReadFile(certFile)
	require.NoError(t, err)
	goodSerial := leafOf(t, goodCert).SerialNumber

	// A bad rewrite: the server keeps the last good certificate and says so.
	require.NoError(t, os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"), 0o644))
	eventually(t, "Healthz reports the unloadable certificate", func() error {
		if err := ts.srv.Healthz(); err == nil {
			return errors.New("Healthz still nil")
		}
		return nil
	})
	err = ts.srv.Healthz()
	require.ErrorContains(t, err, "cannot be loaded")
	require.ErrorContains(t, err, goodSerial.String(), "names the certificate still served")
	got, err := servedCert(t, addr, ts.caPEM)
	require.NoError(t, err)
	require.Equal(t, 0, got.SerialNumber.Cmp(goodSerial), "still serving the last good certificate")
	require.True(t, ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-a")).Allowed)

	// Restoring the files clears the error.
	require.NoError(t, os.WriteFile(certFile, goodCert, 0o644))
	eventually(t, "Healthz recovers once the files are restored", ts.srv.Healthz)

	// A certificate that does not match the key is unloadable too.
	_, otherCert, _, err := certs.Generate([]string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(certFile, otherCert, 0o644))
	eventually(t, "Healthz reports a certificate that does not match its key", func() error {
		if err := ts.srv.Healthz(); err == nil || !strings.Contains(err.Error(), "private key does not match") {
			return fmt.Errorf("Healthz = %v", err)
		}
		return nil
	})

	// A missing file too.
	require.NoError(t, os.Remove(certFile))
	eventually(t, "Healthz reports a missing certificate", func() error {
		if err := ts.srv.Healthz(); err == nil || !strings.Contains(err.Error(), "reading certificate") {
			return fmt.Errorf("Healthz = %v", err)
		}
		return nil
	})

	// A new valid pair is picked up and clears the error.
	caPEM, certPEM, keyPEM, err := certs.Generate([]string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	require.NoError(t, certs.WriteFiles(ts.dir, certPEM, keyPEM))
	eventually(t, "Healthz recovers with a new certificate", ts.srv.Healthz)
	got, err = servedCert(t, addr, caPEM)
	require.NoError(t, err)
	require.Equal(t, 0, got.SerialNumber.Cmp(leafOf(t, certPEM).SerialNumber))
}

func TestNewServerRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	allow := func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }
	dir := t.TempDir()
	_, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		opts    Options
		routes  []Route
		message string
	}{
		"no certificate": {
			Options{Addr: "127.0.0.1:0", CertDir: t.TempDir()}, []Route{identityRoute(allow)},
			"loading the webhook serving certificate from",
		},
		"no cert dir":  {Options{Addr: "127.0.0.1:0"}, []Route{identityRoute(allow)}, "no certificate directory"},
		"no routes":    {Options{Addr: "127.0.0.1:0", CertDir: dir}, nil, "no routes"},
		"no validator": {Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{identityRoute(nil)}, "no Validate func"},
		"duplicate path": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{identityRoute(allow), identityRoute(allow)},
			"path used twice",
		},
		"relative path": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{{Path: "validate", Resource: identityGVR, Kind: identityGVK, Validate: allow}},
			"does not start with /",
		},
		"subtree path": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{{Path: "/", Resource: identityGVR, Kind: identityGVK, Validate: allow}},
			"ends with /",
		},
		"escape in path": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{{Path: "/a%zz", Resource: identityGVR, Kind: identityGVK, Validate: allow}},
			"contains a pattern, escape",
		},
		"pattern in path": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{{Path: "/a/{name}", Resource: identityGVR, Kind: identityGVK, Validate: allow}},
			"contains a pattern, escape",
		},
		"no resource": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{{Path: "/v", Kind: identityGVK, Validate: allow}},
			"lacks a version or resource",
		},
		"no kind": {
			Options{Addr: "127.0.0.1:0", CertDir: dir}, []Route{{Path: "/v", Resource: identityGVR, Validate: allow}},
			"lacks a version or kind",
		},
		"bad address": {Options{Addr: "127.0.0.1:-1", CertDir: dir}, []Route{identityRoute(allow)}, "listening on"},
		"negative in-flight cap": {
			Options{Addr: "127.0.0.1:0", CertDir: dir, MaxInFlight: -1}, []Route{identityRoute(allow)},
			"negative CertReloadInterval, ShutdownTimeout or MaxInFlight",
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, err := NewServer(tc.opts, tc.routes...)
			require.ErrorContains(t, err, tc.message)
			require.Nil(t, srv)
		})
	}

	// An unparsable pair is refused with the reason.
	bad := t.TempDir()
	require.NoError(t, certs.WriteFiles(bad, []byte("not a certificate"), []byte("not a key")))
	_, err = NewServer(Options{Addr: "127.0.0.1:0", CertDir: bad}, identityRoute(allow))
	require.ErrorContains(t, err, "parsing tls.crt and tls.key")
}

func TestRunOnceAndClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)

	// Run returns nil at once for a done context, and cannot run again.
	once, err := NewServer(Options{Addr: "127.0.0.1:0", CertDir: dir}, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	require.NoError(t, err)
	_, ctx := ktesting.NewTestContext(t)
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, once.Run(done))
	require.ErrorContains(t, once.Run(done), "Run called twice")

	// A server that is never run releases its port on Close.
	srv, err := NewServer(Options{Addr: "127.0.0.1:0", CertDir: dir}, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	require.NoError(t, err)
	addr := srv.Addr().String()
	require.NoError(t, srv.Close())
	again, err := NewServer(Options{Addr: addr, CertDir: dir}, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	require.NoError(t, err, "the port is free again")
	require.NoError(t, again.Close())
}
