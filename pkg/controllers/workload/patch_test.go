package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// B12: the Cluster API field patch carries the field as the object now
// holds it, the mark and the resourceVersion, nothing else; a pool's list
// emptied by its outputs (scaled to zero, K7) is removed, not an error.
func TestProviderFieldsPatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"cluster endpoint", &v1alpha1.TerraformCluster{Spec: v1alpha1.TerraformClusterSpec{
			ControlPlaneEndpoint: v1alpha1.APIEndpoint{Host: "cp.example", Port: 6443}}},
			`{"metadata":{"resourceVersion":"7","annotations":{"k":"2/u"}},"spec":{"controlPlaneEndpoint":{"host":"cp.example","port":6443}}}`},
		{"machine provider ID", &v1alpha1.TerraformMachine{Spec: v1alpha1.TerraformMachineSpec{ProviderID: "fake://m"}},
			`{"metadata":{"resourceVersion":"7","annotations":{"k":"2/u"}},"spec":{"providerID":"fake://m"}}`},
		{"pool list", &v1alpha1.TerraformMachinePool{Spec: v1alpha1.TerraformMachinePoolSpec{ProviderIDList: []string{"fake://a"}}},
			`{"metadata":{"resourceVersion":"7","annotations":{"k":"2/u"}},"spec":{"providerIDList":["fake://a"]}}`},
		{"pool list emptied", &v1alpha1.TerraformMachinePool{},
			`{"metadata":{"resourceVersion":"7","annotations":{"k":"2/u"}},"spec":{"providerIDList":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := providerFieldsPatch(tc.obj, "7", providerField(tc.obj), "k", "2/u")
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}
	_, err := providerFieldsPatch(&v1alpha1.TerraformCluster{}, "7", "spec.a.b", "k", "v")
	require.Error(t, err, "only a top-level spec field")
}

// B12, K11: the finalizer and the block-move mark are written as what
// changed: the list whole, the mark set or removed (null), nothing else.
func TestMetaPatch(t *testing.T) {
	fin := v1alpha1.FinalizerDestroy
	for _, tc := range []struct {
		name            string
		fBefore, fAfter []string
		aBefore, aAfter map[string]string
		want            string
	}{
		{"finalizer and mark added", []string{"other"}, []string{"other", fin}, map[string]string{"kept": "v"},
			map[string]string{"kept": "v", v1alpha1.AnnotationBlockMove: "captf"},
			`{"metadata":{"resourceVersion":"7","finalizers":["other","` + fin + `"],"annotations":{"` + v1alpha1.AnnotationBlockMove + `":"captf"}}}`},
		{"last finalizer removed", []string{fin}, nil, nil, nil,
			`{"metadata":{"resourceVersion":"7","finalizers":[]}}`},
		{"mark removed", []string{fin}, []string{fin}, map[string]string{v1alpha1.AnnotationBlockMove: "captf"}, map[string]string{},
			`{"metadata":{"resourceVersion":"7","annotations":{"` + v1alpha1.AnnotationBlockMove + `":null}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := metaPatch("7", tc.fBefore, tc.fAfter, tc.aBefore, tc.aAfter)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}
}
