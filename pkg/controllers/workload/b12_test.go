package workload

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// tenantMeta puts on o labels and annotations a tenant chose, which the
// manager does not read: the cache drops them (B12).
func tenantMeta(o metav1.Object) {
	labels, annotations := map[string]string{}, map[string]string{}
	maps.Copy(annotations, o.GetAnnotations()) // standalone, where set
	for i := range 5 {
		labels[fmt.Sprintf("tenant.example/l%d", i)] = "v"
		annotations[fmt.Sprintf("tenant.example/a%d", i)] = "v"
	}
	labels[v1alpha1.LabelClusterName] = "c1"
	o.SetLabels(labels)
	o.SetAnnotations(annotations)
}

// requireTenantMeta checks that o still carries what tenantMeta put on it.
func requireTenantMeta(t *testing.T, o metav1.Object) {
	t.Helper()
	for i := range 5 {
		require.Equal(t, "v", o.GetLabels()[fmt.Sprintf("tenant.example/l%d", i)], "B12: a tenant label was erased by the manager's write")
		require.Equal(t, "v", o.GetAnnotations()[fmt.Sprintf("tenant.example/a%d", i)], "B12: a tenant annotation was erased by the manager's write")
	}
}

// requireOwnedPatch checks that a is a merge patch of only what the
// manager owns, conditional on resourceVersion rv, and returns it decoded.
func requireOwnedPatch(t *testing.T, a action, rv string) map[string]map[string]json.RawMessage {
	t.Helper()
	p, ok := a.raw.(k8stesting.PatchAction)
	require.True(t, ok, "%s is not a patch", a)
	var doc map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(p.GetPatch(), &doc), "%s", p.GetPatch())
	for top := range doc {
		require.Contains(t, []string{"metadata", "spec"}, top, "patch %s", p.GetPatch())
	}
	for key := range doc["metadata"] {
		require.Contains(t, []string{"resourceVersion", "finalizers", "annotations"}, key, "patch %s", p.GetPatch())
	}
	require.JSONEq(t, fmt.Sprintf("%q", rv), string(doc["metadata"]["resourceVersion"]),
		"the patch must carry the resourceVersion decided on, so it conflicts like an Update")
	if raw, ok := doc["metadata"]["annotations"]; ok {
		var ann map[string]string
		require.NoError(t, json.Unmarshal(raw, &ann))
		for key := range ann {
			require.Contains(t, []string{v1alpha1.AnnotationProviderFieldsGeneration, v1alpha1.AnnotationBlockMove}, key, "patch %s", p.GetPatch())
		}
	}
	return doc
}

// B12: the cache keeps only the keys the manager reads, so a workload
// object written from its cached copy would lose every other label and
// annotation. The finalizer (added, then removed) and the Cluster API
// fields are written as merge patches of those fields alone, with the
// resourceVersion decided on; the stored object keeps the tenant's keys,
// and no workload object is ever updated whole.
func TestB12WritesKeepTenantMetadata(t *testing.T) {
	for _, kind := range []string{kindCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		res := resourceOf(kind)
		t.Run(kind+" finalizer added", func(t *testing.T) {
			f := newFixture(t)
			obj := workloadOf(kind, "obj", tenantMeta)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object))

			require.NoError(t, f.sync(kind, "obj"))

			require.Len(t, f.createdJobs(), 1)
			a, ok := f.find("patch", res, "")
			require.True(t, ok, "the finalizer is written; actions %v", f.allActions())
			doc := requireOwnedPatch(t, a, "10")
			require.JSONEq(t, `["`+v1alpha1.FinalizerDestroy+`"]`, string(doc["metadata"]["finalizers"]))
			stored := f.storedObj(kind, "obj")
			require.Equal(t, []string{v1alpha1.FinalizerDestroy}, stored.GetFinalizers())
			requireTenantMeta(t, stored)
			f.requireNoWholeUpdate(res)
		})
		t.Run(kind+" Cluster API fields", func(t *testing.T) {
			f := newFixture(t)
			obj := workloadOf(kind, "obj", withFinalizer, tenantMeta)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
				newMirror(identityName, testNS, sourceData(), refOf(kind, obj)),
				newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded))
			output := map[string]map[string]string{
				kindCluster:                       {"control_plane_endpoint": `"cp.example:6443"`},
				v1alpha1.KindTerraformMachine:     {"provider_id": `"fake://m-1"`},
				v1alpha1.KindTerraformMachinePool: {"provider_id_list": `["fake://a"]`},
			}[kind]
			f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, output))))
			f.Secrets = append(f.Secrets, sensitiveOutput)
			f.catchUp()
			// The pass that records the apply, then the one that reads the
			// outputs and sets the field.
			for range 3 {
				require.NoError(t, f.sync(kind, "obj"))
				f.catchUp()
			}

			stored := f.storedObj(kind, "obj")
			require.NotEqual(t, "null", providerFieldOf(t, stored), "the field is set")
			require.Equal(t, "2/"+string(stored.GetUID()), stored.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration])
			requireTenantMeta(t, stored)
			f.requireNoWholeUpdate(res)
		})
		t.Run(kind+" finalizer removed", func(t *testing.T) {
			f := newFixture(t)
			obj := workloadOf(kind, "obj", deleting, tenantMeta, func(o metav1.Object) {
				o.SetFinalizers(append(o.GetFinalizers(), "example.com/other"))
			})
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object))

			require.NoError(t, f.sync(kind, "obj"))

			a, ok := f.find("patch", res, "")
			require.True(t, ok, "the finalizer is removed; actions %v", f.allActions())
			// Planned from the object the pass's status write stored
			// (seeded at 10; the write stored 11).
			doc := requireOwnedPatch(t, a, "11")
			require.JSONEq(t, `["example.com/other"]`, string(doc["metadata"]["finalizers"]), "another controller's finalizer stays")
			stored := f.storedObj(kind, "obj")
			require.Equal(t, []string{"example.com/other"}, stored.GetFinalizers())
			requireTenantMeta(t, stored)
			f.requireNoWholeUpdate(res)
		})
	}
}

// requireNoWholeUpdate checks that no write of resource was an Update of
// the object itself (only /status updates and patches).
func (f *fixture) requireNoWholeUpdate(resource string) {
	f.t.Helper()
	for _, a := range f.allActions() {
		if a.resource == resource && a.verb == "update" && a.subresource != "status" {
			f.t.Fatalf("B12: %s updates the whole object from a trimmed cached copy", a)
		}
	}
	require.False(f.t, slices.ContainsFunc(f.allActions(), func(a action) bool {
		return a.resource == resource && a.verb == "patch" && a.subresource != ""
	}), "no subresource patch")
}

// B12, K5: the cached Job keeps spec.suspend. A Job created suspended
// whose start was interrupted before its resumption is resumed by the
// next pass, which sees it suspended only through the trimmed cache.
func TestB12CachedJobKeepsSuspend(t *testing.T) {
	f := newFixture(t)
	obj := newCluster("obj", withFinalizer)
	j := newJob(kindCluster, obj, v1alpha1.JobActionApply, 1, jobRunning)
	j.Spec.Suspend = ptr.To(true)
	j.Annotations[v1alpha1.AnnotationInputsHash] = "h"
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj,
		newMirror(identityName, testNS, sourceData(), refOf(kindCluster, obj)), j)
	f.showRuns = true

	require.NoError(t, f.sync(kindCluster, "obj"))

	require.Contains(t, f.writes(), "patch jobs "+testNS+"/"+j.Name, "the interrupted start is resumed")
	require.NotNil(t, f.storedSecret(testNS, jobs.RunSecretName(j.Name)), "with its run Secret")
}
