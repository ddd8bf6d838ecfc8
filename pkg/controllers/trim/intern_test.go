package trim

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// fresh returns a copy of s in its own allocation, as a decoder makes one.
func fresh(s string) string { return string([]byte(s)) }

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// decoded returns two objects equal to obj, each string in its own
// allocation, as two watch events decode them (a JSON round trip).
func decoded[T any](t *testing.T, obj *T) (*T, *T) {
	t.Helper()
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	a, b := new(T), new(T)
	require.NoError(t, json.Unmarshal(data, a))
	require.NoError(t, json.Unmarshal(data, b))
	return a, b
}

// workloadMetaFor is the metadata of a converged workload object in
// namespace ns.
func workloadMetaFor(ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "m0-a", Namespace: ns, UID: "u", ResourceVersion: "7",
		Labels:          map[string]string{v1alpha1.LabelClusterName: "c0"},
		Annotations:     map[string]string{v1alpha1.AnnotationStandalone: "true"},
		Finalizers:      []string{v1alpha1.FinalizerDestroy},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m0", UID: "o"}},
	}
}

var convergedStatus = v1alpha1.WorkloadStatus{Identity: "bench-shared-1", Conditions: []metav1.Condition{
	{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoApplyYet", Message: "ApplyJobSucceeded: spec.source.image is not set: no Job can run"},
	{Type: "InfrastructureHealthy", Status: metav1.ConditionUnknown, Reason: "WaitingForProvisioning", Message: "not provisioned yet"},
}}

// strs of a cached object: the strings interning must share between two
// copies of it.
type strsOf func(obj interface{}) []string

func metaStrs(m metav1.ObjectMeta) []string {
	out := []string{m.Name, m.Namespace}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		out = append(out, k, m.Labels[k])
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		out = append(out, k, m.Annotations[k])
	}
	for _, r := range m.OwnerReferences {
		out = append(out, r.APIVersion, r.Kind, r.Name)
	}
	return append(out, m.Finalizers...)
}

func condStrs(cs []metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type, string(c.Status), c.Reason, c.Message)
	}
	return out
}

// Issue 25, SPEC P3: two objects decoded from two watch events share every
// repeated string once [ForCache] has run on both, and interning changes no
// value (a status the manager writes from the cached copy is what it was,
// B12's package comment). Each row is a kind the manager caches.
func TestForCacheInternsRepeatedStrings(t *testing.T) {
	type row struct {
		name string
		pair func(t *testing.T) (a, b interface{})
		strs strsOf
	}
	rows := []row{
		{"TerraformCluster", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &v1alpha1.TerraformCluster{ObjectMeta: workloadMetaFor("shared-000"), Status: convergedStatus})
		}, func(o interface{}) []string {
			c := o.(*v1alpha1.TerraformCluster)
			return append(append(metaStrs(c.ObjectMeta), c.Status.Identity), condStrs(c.Status.Conditions)...)
		}},
		{"TerraformMachine", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &v1alpha1.TerraformMachine{ObjectMeta: workloadMetaFor("shared-000"), Status: convergedStatus})
		}, func(o interface{}) []string {
			m := o.(*v1alpha1.TerraformMachine)
			return append(append(metaStrs(m.ObjectMeta), m.Status.Identity), condStrs(m.Status.Conditions)...)
		}},
		{"TerraformMachinePool", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &v1alpha1.TerraformMachinePool{ObjectMeta: workloadMetaFor("shared-000"), Status: convergedStatus})
		}, func(o interface{}) []string {
			p := o.(*v1alpha1.TerraformMachinePool)
			return append(append(metaStrs(p.ObjectMeta), p.Status.Identity), condStrs(p.Status.Conditions)...)
		}},
		{"TerraformClusterIdentity", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "id"},
				Status: v1alpha1.TerraformClusterIdentityStatus{Conditions: convergedStatus.Conditions}})
		}, func(o interface{}) []string {
			i := o.(*v1alpha1.TerraformClusterIdentity)
			return append(metaStrs(i.ObjectMeta), condStrs(i.Status.Conditions)...)
		}},
		{"TerraformPlan", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &v1alpha1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shared-000",
				Labels: map[string]string{"captf.io/plan-phase": "Planned"}, Annotations: map[string]string{v1alpha1.AnnotationPlanJob: "j"}}})
		}, func(o interface{}) []string { return metaStrs(o.(*v1alpha1.TerraformPlan).ObjectMeta) }},
		{"Namespace", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared-000", Labels: map[string]string{"team": "a"}}})
		}, func(o interface{}) []string { return metaStrs(o.(*corev1.Namespace).ObjectMeta) }},
		{"Job", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "shared-000",
				Labels:      map[string]string{v1alpha1.LabelManaged: "true"},
				Annotations: map[string]string{v1alpha1.AnnotationIdentity: "bench-shared-1", v1alpha1.AnnotationJobAction: "apply"}}})
		}, func(o interface{}) []string { return metaStrs(o.(*batchv1.Job).ObjectMeta) }},
		{"mirror", func(t *testing.T) (interface{}, interface{}) {
			return decoded(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "captf-creds-bench-shared-0", Namespace: "shared-000",
				Labels:          map[string]string{v1alpha1.LabelMirrored: "true", v1alpha1.LabelManaged: "true"},
				Annotations:     map[string]string{v1alpha1.AnnotationIdentity: "bench-shared-0", v1alpha1.AnnotationSourceHash: strings.Repeat("b9", 32)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TerraformCluster", Name: "c0", UID: "o"}}},
				Data: map[string][]byte{"k": []byte("v")}})
		}, func(o interface{}) []string { return metaStrs(o.(*corev1.Secret).ObjectMeta) }},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			a, b := r.pair(t)
			// What the cache held before interning: the keep-lists alone.
			wantA, wantB := r.pair(t)
			_, _ = ForCache(wantA)
			_, _ = ForCache(wantB)
			a, err := ForCache(a)
			require.NoError(t, err)
			b, err = ForCache(b)
			require.NoError(t, err)
			sa, sb := r.strs(a), r.strs(b)
			require.Equal(t, sa, sb)
			require.NotEmpty(t, sa)
			for i := range sa {
				if sa[i] == "" {
					continue // cluster-scoped: no namespace
				}
				require.Truef(t, same(sa[i], sb[i]), "%q (string %d of %q) is not shared between the two cached copies", sa[i], i, sa)
			}
			require.True(t, equality.Semantic.DeepEqual(wantA, a), "interning changed a value")
			// Idempotent: a second pass changes nothing.
			again, err := ForCache(a)
			require.NoError(t, err)
			require.True(t, equality.Semantic.DeepEqual(wantA, again))
		})
	}
}

// The table stays bounded whatever tenants write: a string longer than
// internMaxLen is returned as it is, and every string interned lands in one
// of internSlots slots, the last one there winning.
func TestInternIsBounded(t *testing.T) {
	long := strings.Repeat("x", internMaxLen+1)
	require.True(t, same(long, Intern(long)), "a long string must not be copied into the table")
	require.Equal(t, "", Intern(""))

	a := Intern(fresh("captf-interned-a"))
	require.True(t, same(a, Intern(fresh("captf-interned-a"))))
	require.Equal(t, "captf-interned-a", a)

	// Many distinct strings evict, but never grow the table, and every
	// result equals its input.
	for i := range 4 * internSlots {
		s := fresh("tenant-" + strings.Repeat("y", i%50) + string(rune('a'+i%26)))
		require.Equal(t, s, Intern(s))
	}
	require.Len(t, strs.slots, internSlots)
}
