package trim

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// tenantLabels is about 1 MiB of labels a tenant may put on its own object:
// many keys, each value at most 63 characters (B12's attack).
func tenantLabels(size int) map[string]string {
	out := map[string]string{}
	value := strings.Repeat("v", validation.LabelValueMaxLength)
	for i := 0; size > 0; i++ {
		key := fmt.Sprintf("tenant.example/k%06d", i)
		out[key] = value
		size -= len(key) + len(value)
	}
	return out
}

// kept is metadata carrying every key k keeps, with a value naming it.
func kept(k Keep) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for key := range k.Labels {
		labels[key] = "kept"
	}
	for key := range k.Annotations {
		annotations[key] = "kept"
	}
	return labels, annotations
}

// withTenant returns m's maps plus the tenant's keys.
func withTenant(m map[string]string, tenant map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tenant {
		out[k] = v
	}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func size(t *testing.T, obj interface{}) int {
	t.Helper()
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return len(b)
}

var managed = []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}}

// B12: each kind keeps exactly the keys of its keep-list, drops a tenant's
// 1 MiB of labels and annotations and the managed fields, and the status
// the manager writes (captf kinds) stays whole. Applying the transform again
// changes nothing (client-go may apply it twice).
func TestForCacheKeepsOnlyWhatIsRead(t *testing.T) {
	tenant := tenantLabels(1 << 20)
	status := v1alpha1.WorkloadStatus{Identity: "kept", LastJob: &v1alpha1.JobReference{Name: "j"}, Conditions: []metav1.Condition{{Type: "Ready", Reason: "R", Message: "kept"}}}
	workloadMeta := func() metav1.ObjectMeta {
		l, a := kept(Workload)
		return metav1.ObjectMeta{Name: "o", Namespace: "ns", Labels: withTenant(l, tenant), Annotations: withTenant(a, tenant),
			ManagedFields: managed, Finalizers: []string{v1alpha1.FinalizerDestroy}, OwnerReferences: []metav1.OwnerReference{{Name: "owner"}}}
	}
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		keep Keep
		// check inspects what is left beside metadata.
		check func(t *testing.T, obj runtime.Object)
	}{
		{"TerraformCluster", &v1alpha1.TerraformCluster{ObjectMeta: workloadMeta(), Status: status}, Workload, func(t *testing.T, o runtime.Object) {
			require.Equal(t, status, o.(*v1alpha1.TerraformCluster).Status, "the status the manager writes is kept whole")
		}},
		{"TerraformMachine", &v1alpha1.TerraformMachine{ObjectMeta: workloadMeta(), Status: status}, Workload, func(t *testing.T, o runtime.Object) {
			require.Equal(t, status, o.(*v1alpha1.TerraformMachine).Status)
		}},
		{"TerraformMachinePool", &v1alpha1.TerraformMachinePool{ObjectMeta: workloadMeta(), Status: status}, Workload, func(t *testing.T, o runtime.Object) {
			require.Equal(t, status, o.(*v1alpha1.TerraformMachinePool).Status)
		}},
		{"TerraformClusterIdentity", &v1alpha1.TerraformClusterIdentity{
			ObjectMeta: metav1.ObjectMeta{Name: "id", Labels: tenant, Annotations: tenant, ManagedFields: managed},
			Status:     v1alpha1.TerraformClusterIdentityStatus{Namespaces: []string{"a"}, Conditions: []metav1.Condition{{Type: "Ready"}}},
		}, Identity, func(t *testing.T, o runtime.Object) {
			require.Equal(t, []string{"a"}, o.(*v1alpha1.TerraformClusterIdentity).Status.Namespaces, "the status the manager writes is kept whole")
		}},
		{"Job", func() runtime.Object {
			l, a := kept(Job)
			now := metav1.Now()
			return &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", Labels: withTenant(l, tenant), Annotations: withTenant(a, tenant), ManagedFields: managed},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i",
					Env: []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", 1<<20)}}}}}},
					Selector: &metav1.LabelSelector{MatchLabels: tenant}, Suspend: ptr.To(true)},
				Status: batchv1.JobStatus{
					Conditions: []batchv1.JobCondition{
						{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Message: strings.Repeat("m", 1000)},
						{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "deadline"},
						{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded},
					},
					StartTime: &now, CompletionTime: &now, Active: 1, CompletedIndexes: strings.Repeat("1,", 1000),
				},
			}
		}(), Job, func(t *testing.T, o runtime.Object) {
			j := o.(*batchv1.Job)
			require.Equal(t, batchv1.JobSpec{Suspend: ptr.To(true)}, j.Spec, "of the spec only suspend (K5), no pod template (B1)")
			require.Len(t, j.Status.Conditions, 2, "the conditions jobs.Status reads, no other")
			require.Equal(t, batchv1.JobFailureTarget, j.Status.Conditions[0].Type)
			require.Equal(t, "deadline", j.Status.Conditions[0].Message)
			require.NotNil(t, j.Status.CompletionTime)
			require.NotNil(t, j.Status.StartTime, "status.lastRun.startTime (SPEC O1)")
			require.Empty(t, j.Status.CompletedIndexes)
		}},
		{"TerraformPlan", func() runtime.Object {
			// An approver may update plans (O8): its labels stay out (B12).
			l, a := kept(Plan)
			return &v1alpha1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: withTenant(l, tenant), Annotations: withTenant(a, tenant), ManagedFields: managed},
				Status: v1alpha1.TerraformPlanStatus{Phase: v1alpha1.PlanPhasePending}}
		}(), Plan, func(t *testing.T, o runtime.Object) {
			require.Equal(t, v1alpha1.PlanPhasePending, o.(*v1alpha1.TerraformPlan).Status.Phase, "the status the manager writes is kept")
		}},
		{"mirror Secret", func() runtime.Object {
			l, a := kept(Mirror)
			delete(a, credentials.CachedDataHashAnnotation)
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Labels: withTenant(l, tenant), Annotations: withTenant(a, tenant), ManagedFields: managed},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte(strings.Repeat("d", 1<<20))}}
		}(), Mirror, func(t *testing.T, o runtime.Object) {
			s := o.(*corev1.Secret)
			require.Nil(t, s.Data, "B1")
			require.Equal(t, corev1.SecretTypeOpaque, s.Type)
			require.NotEmpty(t, s.Annotations[credentials.CachedDataHashAnnotation], "the data's hash stays (B1)")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := size(t, tc.obj)
			out, err := ForCache(tc.obj)
			require.NoError(t, err)
			o := out.(runtime.Object)
			m := o.(metav1.Object)
			require.Nil(t, m.GetManagedFields())
			for key := range m.GetLabels() {
				require.Contains(t, tc.keep.Labels, key, "label %s is in no keep-list", key)
			}
			for key := range m.GetAnnotations() {
				if key != credentials.CachedDataHashAnnotation {
					require.Contains(t, tc.keep.Annotations, key, "annotation %s is in no keep-list", key)
				}
			}
			for key := range tc.keep.Labels {
				require.Equal(t, "kept", m.GetLabels()[key], "label %s is kept", key)
			}
			for key := range tc.keep.Annotations {
				if key != credentials.CachedDataHashAnnotation {
					require.Equal(t, "kept", m.GetAnnotations()[key], "annotation %s is kept", key)
				}
			}
			if tc.name != "TerraformClusterIdentity" {
				require.NotEmpty(t, m.GetName())
			}
			tc.check(t, o)
			after := size(t, o)
			require.Less(t, after, 16<<10, "from %d bytes to %d: a tenant's MiB does not reach the cache", before, after)

			again := o.DeepCopyObject()
			out2, err := ForCache(again)
			require.NoError(t, err)
			require.Equal(t, o, out2, "idempotent")
		})
	}
}

// B12: Namespaces keep every label (any may be named by an
// allowedNamespaces.selector), their phase and deletion, and nothing else.
func TestForCacheNamespace(t *testing.T) {
	tenant := tenantLabels(64 << 10)
	now := metav1.Now()
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: tenant, Annotations: tenant, ManagedFields: managed, DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating, Conditions: []corev1.NamespaceCondition{{Type: "X", Message: "m"}}},
	}
	out, err := ForCache(ns)
	require.NoError(t, err)
	got := out.(*corev1.Namespace)
	require.Equal(t, tenant, got.Labels, "labels whole (N4)")
	require.Nil(t, got.Annotations)
	require.Nil(t, got.ManagedFields)
	require.Equal(t, corev1.NamespaceSpec{}, got.Spec)
	require.Equal(t, corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}, got.Status)
	require.NotNil(t, got.DeletionTimestamp)
}

// The keep-lists name exact, valid keys (no prefix a tenant could fill),
// each with a reader.
func TestKeepListsAreExactKeys(t *testing.T) {
	lists := map[string]Keep{"Workload": Workload, "Identity": Identity, "Namespace": Namespace, "Job": Job, "Mirror": Mirror, "Plan": Plan}
	for name, k := range lists {
		for _, m := range []map[string]string{k.Labels, k.Annotations} {
			for key, why := range m {
				require.NotEmpty(t, why, "%s: %s says who reads it", name, key)
				require.Empty(t, validation.IsQualifiedName(key), "%s: %s is an exact key", name, key)
				require.False(t, strings.HasSuffix(key, "*"), "%s: %s", name, key)
			}
		}
	}
}

// Every label and annotation key the API packages define is either kept
// by some list or named in NotKept with why: a key a controller starts to
// read cannot be dropped by the caches unnoticed.
func TestEveryWellKnownKeyIsClassified(t *testing.T) {
	classified := map[string]bool{}
	for _, k := range []Keep{Workload, Identity, Namespace, Job, Mirror, Plan} {
		for key := range k.Labels {
			classified[key] = true
		}
		for key := range k.Annotations {
			classified[key] = true
		}
	}
	for key := range NotKept {
		classified[key] = true
	}
	for _, pkg := range []string{"infrastructure/v1alpha1", "capi/v1beta2"} {
		keys := wellKnownKeys(t, filepath.Join("..", "..", "apis", pkg))
		require.NotEmpty(t, keys, "the keys of %s were found", pkg)
		for name, key := range keys {
			require.True(t, classified[key], "%s.%s (%s) is neither in a keep-list of pkg/controllers/trim nor in NotKept", pkg, name, key)
		}
	}
}

// wellKnownKeys returns the string constants named Label* or Annotation*
// in the Go package in dir whose value is a key (has a prefix), by name.
func wellKnownKeys(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Label") && !strings.HasPrefix(name.Name, "Annotation") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				key, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				if strings.Contains(key, "/") { // not a value such as LabelTrue
					out[name.Name] = key
				}
			}
			return false
		})
	}
	return out
}
