package engine

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
)

// TestMoveWithoutClusterctl is K11's deterministic companion of a
// clusterctl move, on the real API server: an applied cluster's state is
// owned by it and marked with the applied spec and inputs; clusterctl's
// deletion of the source copy (paused, delete-for-move) starts no destroy;
// a copy with the same namespace and name but a new UID and no status
// (what the move creates in the target), with the state Secret copied,
// adopts the applied state (no apply Job, its outputs read, the state
// owned by the copy); a spec change of the copy then applies once.
func TestMoveWithoutClusterctl(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "move", "c")
	stateName := tfstate.SecretName(suffix)
	secrets := f.Env.Kube.CoreV1().Secrets(ns)
	clusters := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns)

	j := applyJob(f, ns, 1)
	writeState(f, ns, suffix, stateName, tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{
		"control_plane_endpoint": `"cp.move.example:6443"`,
	})))
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	var state *corev1.Secret
	f.WaitFor("the state owned by the cluster and marked as applied", func() (bool, string) {
		var err error
		if state, err = secrets.Get(f.Ctx, stateName, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		owned := len(state.OwnerReferences) == 1 && state.OwnerReferences[0].UID == c.UID
		return owned && state.Annotations[v1alpha1.AnnotationAppliedSpec] != "" && state.Annotations[v1alpha1.AnnotationAppliedInputs] != "",
			fmt.Sprintf("owners %v, annotations %v", state.OwnerReferences, state.Annotations)
	})
	// The state's marks and the endpoint are separate writes: wait for both.
	var source *v1alpha1.TerraformCluster
	f.WaitFor("T5: the endpoint from the outputs", func() (bool, string) {
		source = f.GetCluster(ns, c.Name)
		return source.Spec.ControlPlaneEndpoint.Host == "cp.move.example", fmt.Sprintf("endpoint %+v", source.Spec.ControlPlaneEndpoint)
	})

	// clusterctl pauses, then deletes the source copy with delete-for-move.
	f.EditCluster(ns, c.Name, func(cur *v1alpha1.TerraformCluster) {
		cur.Annotations[v1alpha1.AnnotationPaused] = ""
		cur.Annotations[v1alpha1.AnnotationDeleteForMove] = ""
	})
	if err := clusters.Delete(f.Ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the source copy gone", func() (bool, string) {
		_, err := clusters.Get(f.Ctx, c.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if n := len(f.Jobs(ns, v1alpha1.JobActionDestroy)); n != 0 {
		t.Fatalf("K11: %d destroy Jobs for a deletion for move", n)
	}
	// The deletion for move keeps the state (no longer owned, so the
	// garbage collector keeps it too); clusterctl has copied it to the
	// target and deletes the source's copy itself.
	kept, err := secrets.Get(f.Ctx, stateName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("K11: the state after a deletion for move: %v", err)
	}
	if len(kept.OwnerReferences) != 0 || string(kept.Data[tfstate.DataKey]) != string(state.Data[tfstate.DataKey]) {
		t.Fatalf("K11: the state kept must be disowned and unchanged: owners %v", kept.OwnerReferences)
	}
	if err := secrets.Delete(f.Ctx, stateName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The target: the state Secret as copied (its owner is the copy, set
	// by clusterctl to the new UID; here none yet), then the object with
	// the spec it had, no status, a new UID.
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: stateName, Labels: state.Labels, Annotations: state.Annotations},
		Type: state.Type, Data: state.Data}
	if _, err := secrets.Create(f.Ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Name, Annotations: framework.Standalone()}, Spec: source.Spec}
	cp, err = clusters.Create(f.Ctx, cp, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the copy adopts the applied state", func() (bool, string) {
		got := f.GetCluster(ns, c.Name)
		la := got.Status.LastApply
		return la != nil && la.JobName == "(adopted from the state)" && got.Status.Outputs != nil, fmt.Sprintf("lastApply %+v; %s", la, framework.Describe(got.Status.Conditions))
	})
	for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if x.Name != j.Name {
			t.Fatalf("K11: the copy started apply Job %s: applied twice", x.Name)
		}
	}
	f.WaitFor("the copied state owned by the copy", func() (bool, string) {
		s, err := secrets.Get(f.Ctx, stateName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range s.OwnerReferences {
			if r.UID == cp.UID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("owners %v", s.OwnerReferences)
	})

	// A spec change of the copy applies, once.
	f.EditCluster(ns, c.Name, func(got *v1alpha1.TerraformCluster) { got.Spec.Source.Image = "example.com/module:2" })
	f.WaitFor("one apply Job of the copy's change", func() (bool, string) {
		var mine []string
		for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if owner := metav1.GetControllerOf(&x); owner != nil && owner.UID == types.UID(cp.UID) {
				mine = append(mine, x.Name)
			}
		}
		return len(mine) == 1, fmt.Sprintf("the copy's apply Jobs: %v", mine)
	})
}
