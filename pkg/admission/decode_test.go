package admission

import (
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func TestDecodeObject(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		raw     runtime.RawExtension
		wantErr string
	}{
		"full object": {raw: runtime.RawExtension{Raw: []byte(
			`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformClusterIdentity","metadata":{"name":"team-a"},"spec":{"secretRef":{"name":"s","namespace":"n"}}}`)}},
		"no apiVersion or kind": {raw: runtime.RawExtension{Raw: []byte(
			`{"metadata":{"name":"team-a"},"spec":{"secretRef":{"name":"s","namespace":"n"}}}`)}},
		"unknown fields are ignored": {raw: runtime.RawExtension{Raw: []byte(
			`{"metadata":{"name":"team-a"},"spec":{"secretRef":{"name":"s","namespace":"n"},"fromTheFuture":true}}`)}},
		"in-process object": {raw: runtime.RawExtension{Object: &v1alpha1.TerraformClusterIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
			Spec:       v1alpha1.TerraformClusterIdentitySpec{SecretRef: v1alpha1.SecretReference{Name: "s", Namespace: "n"}},
		}}},
		"another kind": {
			raw:     runtime.RawExtension{Raw: []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformCluster","metadata":{"name":"team-a"}}`)},
			wantErr: "object is infrastructure.cluster.x-k8s.io/v1alpha1 TerraformCluster, expected infrastructure.cluster.x-k8s.io/v1alpha1 TerraformClusterIdentity",
		},
		"another version": {
			raw:     runtime.RawExtension{Raw: []byte(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"TerraformClusterIdentity"}`)},
			wantErr: "object is infrastructure.cluster.x-k8s.io/v1beta1 TerraformClusterIdentity, expected",
		},
		"a core kind": {
			raw:     runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","data":{"k":"` + secretValue + `"}}`)},
			wantErr: "object is v1 Secret, expected",
		},
		"wrong field type": {
			raw:     runtime.RawExtension{Raw: []byte(`{"metadata":{"annotations":{"a":"` + secretValue + `"}},"spec":{"secretRef":"` + secretValue + `"}}`)},
			wantErr: "decoding infrastructure.cluster.x-k8s.io/v1alpha1 TerraformClusterIdentity",
		},
		"not JSON": {
			raw:     runtime.RawExtension{Raw: []byte(`{"metadata":` + secretValue)},
			wantErr: "decoding",
		},
		"empty":     {raw: runtime.RawExtension{}, wantErr: "no object in the request"},
		"JSON null": {raw: runtime.RawExtension{Raw: []byte(" null ")}, wantErr: "no object in the request"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var got v1alpha1.TerraformClusterIdentity
			err := DecodeObject(tc.raw, &got)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.NotContains(t, err.Error(), secretValue, "decode errors are returned to users and logged (SPEC X1)")
				return
			}
			require.NoError(t, err)
			require.Equal(t, "team-a", got.Name)
			require.Equal(t, "s", got.Spec.SecretRef.Name)
		})
	}

	err := DecodeObject(runtime.RawExtension{Raw: []byte(`{}`)}, &corev1.Secret{})
	require.ErrorContains(t, err, "decoding into *v1.Secret", "only types of the private scheme can be decoded")
}

func TestDecodeObjects(t *testing.T) {
	t.Parallel()
	create := identityRequest(t, admissionv1.Create, "team-a")
	oldObj, obj, err := DecodeObjects[v1alpha1.TerraformClusterIdentity](create)
	require.NoError(t, err)
	require.Nil(t, oldObj)
	require.Equal(t, "team-a", obj.Name)

	update := identityRequest(t, admissionv1.Update, "team-a")
	oldObj, obj, err = DecodeObjects[v1alpha1.TerraformClusterIdentity](update)
	require.NoError(t, err)
	require.Equal(t, "team-a", oldObj.Name)
	require.Equal(t, "team-a", obj.Name)
	require.NotSame(t, oldObj, obj)

	del := identityRequest(t, admissionv1.Delete, "team-a")
	del.Object = runtime.RawExtension{Raw: []byte("null")}
	oldObj, obj, err = DecodeObjects[v1alpha1.TerraformClusterIdentity](del)
	require.NoError(t, err)
	require.Equal(t, "aws-credentials", oldObj.Spec.SecretRef.Name)
	require.Nil(t, obj)

	_, _, err = DecodeObjects[v1alpha1.TerraformCluster](create)
	require.ErrorContains(t, err, "decoding object: object is infrastructure.cluster.x-k8s.io/v1alpha1 TerraformClusterIdentity, expected infrastructure.cluster.x-k8s.io/v1alpha1 TerraformCluster")
	update.OldObject.Raw = []byte(`{"spec":[]}`)
	_, _, err = DecodeObjects[v1alpha1.TerraformClusterIdentity](update)
	require.ErrorContains(t, err, "decoding oldObject")
	_, _, err = DecodeObjects[v1alpha1.TerraformClusterIdentity](nil)
	require.ErrorContains(t, err, "no admission request")
}

func TestResultAccessors(t *testing.T) {
	t.Parallel()
	require.True(t, Allow("w").Allowed())
	require.Equal(t, []string{"w"}, Allow("w").Warnings())
	require.NoError(t, Allow().Err())
	require.False(t, Result{}.Allowed(), "the zero Result never allows")
	require.Error(t, Result{}.Err())
	require.False(t, Deny(nil).Allowed())
	require.Error(t, Deny(nil).Err())
	require.False(t, InternalError(nil).Allowed())
	require.Error(t, InternalError(nil).Err())
}
