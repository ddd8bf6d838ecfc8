package admission

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
)

// A mutating route's AllowWithPatch reaches the API server as a JSON Patch
// with its type; a plain Allow carries none.
func TestAllowWithPatchSendsAJSONPatch(t *testing.T) {
	t.Parallel()
	patch := []byte(`[{"op":"add","path":"/spec/approvedBy","value":"alice"}]`)
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result {
		return AllowWithPatch(patch)
	}))
	resp := ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-a"))
	require.True(t, resp.Allowed, "result: %+v", resp.Result)
	require.NotNil(t, resp.PatchType)
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	require.JSONEq(t, string(patch), string(resp.Patch))

	ts = startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	resp = ts.review(t, identityPath, identityRequest(t, admissionv1.Create, "team-a"))
	require.True(t, resp.Allowed)
	require.Nil(t, resp.PatchType)
	require.Empty(t, resp.Patch)
}
