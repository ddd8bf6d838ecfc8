package identity

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
	"github.com/captf/captf/pkg/generated/informers/externalversions"
)

func TestRouteServesTheIdentityResource(t *testing.T) {
	route := (&Validator{}).Route()
	require.Equal(t, "/validate-terraformclusteridentity", Path)
	require.Equal(t, Path, route.Path)
	require.Equal(t, v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities"), route.Resource)
	require.Equal(t, "infrastructure.cluster.x-k8s.io", route.Resource.Group)
	require.Equal(t, v1alpha1.SchemeGroupVersion.WithKind("TerraformClusterIdentity"), route.Kind)
	require.Empty(t, route.SubResource, "the status subresource never reaches the validator")
	require.NotNil(t, route.Validate)
}

// A4 with the real index.Resolver: a machine that inherits the identity from
// its cluster's defaults, and one being deleted, both count; a cluster that
// names another identity does not.
func TestA4DeleteRefusedForUsersFoundByTheResolver(t *testing.T) {
	factory := externalversions.NewSharedInformerFactory(captffake.NewSimpleClientset(), 0)
	inf := factory.Infrastructure().V1alpha1()
	clusters, machines, pools := inf.TerraformClusters().Informer(), inf.TerraformMachines().Informer(), inf.TerraformMachinePools().Informer()
	require.NoError(t, index.AddWorkloadIndexers(clusters, machines, pools))
	resolver := &index.Resolver{
		ClusterIndexer: clusters.GetIndexer(),
		MachineIndexer: machines.GetIndexer(),
		PoolIndexer:    pools.GetIndexer(),
	}
	v := &Validator{Users: resolver.Users}
	ctx, _ := bufferedContext(t)

	cluster := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "prod", UID: "uid-prod"},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: "other"},
			Defaults:    &v1alpha1.ClusterDefaults{IdentityRef: &v1alpha1.IdentityReference{Name: identityName}},
		},
	}
	inheriting := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns-a", Name: "worker-0", UID: "uid-worker-0",
		Labels: map[string]string{v1alpha1.LabelClusterName: "prod"},
	}}
	require.NoError(t, clusters.GetIndexer().Add(cluster))

	// Unused: allowed.
	errs, err := v.Validate(ctx, alice, admissionv1.Delete, newIdentity(), nil)
	require.NoError(t, err)
	require.Empty(t, errs)

	// Used through the cluster's defaults.
	require.NoError(t, machines.GetIndexer().Add(inheriting))
	errs, err = v.Validate(ctx, alice, admissionv1.Delete, newIdentity(), nil)
	require.NoError(t, err)
	require.Len(t, errs, 1)
	require.Equal(t, "metadata.name", errs[0].Field)
	require.Equal(t, "TerraformClusterIdentity team-a is in use by TerraformMachine ns-a/worker-0; delete or re-point its users first", errs[0].Detail)

	// Only a pool being deleted uses it now: still refused.
	require.NoError(t, machines.GetIndexer().Delete(inheriting))
	now := metav1.Now()
	require.NoError(t, pools.GetIndexer().Add(&v1alpha1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-b", Name: "pool-0", UID: "uid-pool-0", DeletionTimestamp: &now, Finalizers: []string{v1alpha1.FinalizerDestroy}},
		Spec:       v1alpha1.TerraformMachinePoolSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identityName}},
	}))
	errs, err = v.Validate(ctx, alice, admissionv1.Delete, newIdentity(), nil)
	require.NoError(t, err)
	require.Len(t, errs, 1)
	require.Equal(t, "TerraformClusterIdentity team-a is in use by TerraformMachinePool ns-b/pool-0 (being deleted: its destroy needs the credentials); delete or re-point its users first", errs[0].Detail)
}

// The validator behind the real webhook server: decoding, the mapping of
// field errors to 422 Invalid and of errors to 500, and the uid echo.
// Not parallel: it reads captf_sar_denials_total.
func TestRouteOverHTTPS(t *testing.T) {
	sar := newFakeSAR(func(spec authorizationv1.SubjectAccessReviewSpec) sarAnswer {
		if spec.User == "bob" {
			return sarAllow
		}
		return sarDeny
	})
	users := &fakeUsers{refs: []index.Ref{{Kind: "TerraformMachine", Namespace: "ns-a", Name: "worker-0"}}}
	v := &Validator{SAR: sar.client.AuthorizationV1().SubjectAccessReviews(), Users: users.Users}
	ts := startServer(t, v.Route())

	t.Run("A2 create denied is 422 Invalid naming the user and the Secret", func(t *testing.T) {
		before := sarDenials(t)
		req := request(t, admissionv1.Create, alice, nil, newIdentity())
		resp := ts.review(t, req)
		require.False(t, resp.Allowed)
		require.NotNil(t, resp.Result)
		require.Equal(t, metav1.StatusFailure, resp.Result.Status)
		require.EqualValues(t, http.StatusUnprocessableEntity, resp.Result.Code)
		require.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
		require.Equal(t, `TerraformClusterIdentity.infrastructure.cluster.x-k8s.io "team-a" is invalid: spec.secretRef: Forbidden: `+
			sarRefusal(alice.Username, secretNS, secretName, createOrSecretRefWhy), resp.Result.Message)
		require.Equal(t, before+1, sarDenials(t))
		require.Equal(t, wantSARSpec(alice, secretNS, secretName), sar.reviews()[len(sar.reviews())-1], "the review carries the request's user")
	})

	t.Run("A2 create allowed", func(t *testing.T) {
		resp := ts.review(t, request(t, admissionv1.Create, authenticationv1.UserInfo{Username: "bob"}, nil, newIdentity()))
		require.True(t, resp.Allowed, "result: %+v", resp.Result)
	})

	t.Run("A3 narrowing by a user who may not read the Secret is allowed without a review", func(t *testing.T) {
		n := len(sar.reviews())
		resp := ts.review(t, request(t, admissionv1.Update, alice, newIdentity(), newIdentity(withList("ns-a"))))
		require.True(t, resp.Allowed, "result: %+v", resp.Result)
		require.Len(t, sar.reviews(), n)
	})

	t.Run("A4 delete in use is 422 naming a user", func(t *testing.T) {
		resp := ts.review(t, request(t, admissionv1.Delete, alice, newIdentity(), nil))
		require.False(t, resp.Allowed)
		require.EqualValues(t, http.StatusUnprocessableEntity, resp.Result.Code)
		require.Contains(t, resp.Result.Message, "metadata.name: Forbidden: TerraformClusterIdentity team-a is in use by TerraformMachine ns-a/worker-0")
	})

	t.Run("A4 delete without the old object fails closed with 500", func(t *testing.T) {
		resp := ts.review(t, request(t, admissionv1.Delete, alice, nil, nil))
		require.False(t, resp.Allowed)
		require.EqualValues(t, http.StatusInternalServerError, resp.Result.Code)
		require.Contains(t, resp.Result.Message, "internal error: DELETE request carries no oldObject")
	})

	t.Run("X4 an undecodable object is an internal error, not an allow", func(t *testing.T) {
		req := request(t, admissionv1.Create, alice, nil, nil)
		req.Object = runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","data":{"k":"` + canary + `"}}`)}
		resp := ts.review(t, req)
		require.False(t, resp.Allowed)
		require.EqualValues(t, http.StatusInternalServerError, resp.Result.Code)
		require.Contains(t, resp.Result.Message, "internal error: decoding object")
	})

	t.Run("CONNECT is allowed", func(t *testing.T) {
		resp := ts.review(t, request(t, admissionv1.Connect, alice, nil, newIdentity()))
		require.True(t, resp.Allowed, "result: %+v", resp.Result)
	})
}

// request is an AdmissionRequest as the API server sends it for the identity.
func request(t *testing.T, op admissionv1.Operation, user authenticationv1.UserInfo, oldObj, obj *v1alpha1.TerraformClusterIdentity) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(o *v1alpha1.TerraformClusterIdentity) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		data, err := json.Marshal(o)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: data}
	}
	return &admissionv1.AdmissionRequest{
		UID:       types.UID("uid-" + string(op) + "-" + t.Name()),
		Kind:      metav1.GroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("TerraformClusterIdentity")),
		Resource:  metav1.GroupVersionResource(v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities")),
		Name:      identityName,
		Operation: op,
		UserInfo:  user,
		OldObject: raw(oldObj),
		Object:    raw(obj),
	}
}

// testServer is a running admission.Server with a client that trusts it.
type testServer struct {
	client *http.Client
	base   string
}

func startServer(t *testing.T, routes ...admission.Route) *testServer {
	t.Helper()
	dir := t.TempDir()
	caPEM, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	srv, err := admission.NewServer(admission.Options{Addr: "127.0.0.1:0", CertDir: dir}, routes...)
	require.NoError(t, err)

	ctx, logs := bufferedContext(t)
	// Registered before the shutdown below, so it runs after it and sees
	// every line the server wrote.
	t.Cleanup(func() {
		require.NotContains(t, logs.String(), canary, "SPEC X1: no content in a log line")
	})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(transport.CloseIdleConnections)
	return &testServer{
		client: &http.Client{Transport: transport, Timeout: 30 * time.Second},
		base:   "https://" + srv.Addr().String(),
	}
}

// review posts req at Path and returns the response, requiring HTTP 200, the
// uid echoed and no content in the body (SPEC X1, X3).
func (ts *testServer) review(t *testing.T, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	require.NoError(t, err)
	httpResp, err := ts.client.Post(ts.base+Path, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer httpResp.Body.Close()
	data, err := io.ReadAll(httpResp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, httpResp.StatusCode, "body: %s", data)
	require.NotContains(t, string(data), canary, "SPEC X1")
	require.NotContains(t, string(data), policyDetail, "status.reason stays out of the response")

	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(data, &out), "body: %s", data)
	require.NotNil(t, out.Response, "body: %s", data)
	require.Equal(t, req.UID, out.Response.UID, "the request uid must be echoed")
	return out.Response
}
