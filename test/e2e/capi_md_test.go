package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestCAPITemplates is issue 22's proof of the template kinds with Cluster
// API (SPEC K9, K12): Cluster API v1.14's core manager (with the
// ClusterTopology feature gate) beside captf's in-cluster manager, as in
// TestCAPIClusterAndMachine, on a node of its own:
//
//   - a Cluster with a TerraformCluster and no controlPlaneRef is
//     provisioned; a MachineDeployment of 3 replicas whose machine template
//     names a TerraformMachineTemplate and a pre-made bootstrap data Secret
//     (spec.template.spec.bootstrap.dataSecretName, no bootstrap provider)
//     gives 3 Machines in phase Provisioned, each with its own provider ID
//     (the module's, from the machine's name), their TerraformMachines
//     cloned from the template and controlled by their Machines, and 3
//     machine resources in the fake cloud beside the cluster's;
//   - scaled to 1, the 2 Machines Cluster API deletes are destroyed (one
//     DELETE each in the fake cloud, answered 204): the fake cloud holds
//     the cluster's resource and the remaining machine's, nothing else;
//   - deleting the Cluster leaves nothing in the fake cloud;
//   - a ClusterClass built from a TerraformClusterTemplate and a
//     TerraformMachineTemplate creates a Cluster through spec.topology whose
//     TerraformCluster gets its identityRef from the class's patch and is
//     provisioned, and whose MachineDeployment's Machines are provisioned
//     (capi_clusterclass_test.go, with stand-in control plane and bootstrap
//     providers); deleting it leaves nothing in the fake cloud;
//   - neither the credential nor the bootstrap data is in any Job's log
//     (scanned while the machines are provisioned), the manager's log or
//     any event (X1, K5).
//
// Cluster API creates the MachineDeployment's Machines although no control
// plane is initialized: the MachineSet's preflight checks
// (MachineSetPreflightChecks, on by default) look at the Cluster's
// controlPlaneRef and are skipped when it has none, and the Machine
// controller does not wait for ControlPlaneInitialized to reconcile a
// worker's bootstrap and infrastructure (it only logs less). A Cluster
// without a controlPlaneRef is a valid Cluster API object (the field is
// optional), so a user can do the same; with a control plane provider the
// preflight checks wait for it as they would for any provider.
func TestCAPITemplates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	begin := time.Now()
	e, cp := start(ctx, t, true, "--feature-gates=ClusterTopology=true")
	defer func() {
		if t.Failed() && !cp.Stopped() {
			e.dumpState(t)
		}
	}()

	r := &mdRun{env: e}
	e.runSteps(ctx, t, cp, []step{
		{"ProvisionCluster", r.provisionCluster},
		{"ThreeMachinesProvisioned", r.threeMachines},
		{"ScaleToOneDestroysTwo", r.scaleToOne},
		{"DeleteClusterLeavesNothing", r.deleteCluster},
		{"ClusterClassTopologyProvisionsCluster", r.clusterClassTopology},
		{"ClusterClassMachinesProvisioned", r.clusterClassMachines},
		{"ClusterClassDeleteLeavesNothing", r.clusterClassDelete},
		{"NoSecretInManagerLogsOrEvents", e.noCredentialInLogs},
	})
	t.Logf("TestCAPITemplates took %s in all", time.Since(begin).Round(time.Millisecond))
}

const (
	mdName         = "workers"
	mdTemplateName = "workers-v1"
	mdBootstrap    = "workers-bootstrap"
)

var (
	capiMDGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
	capiMSGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinesets"}
)

// mdRun is what the steps share.
type mdRun struct {
	*env
	clusterID string
	// ids are the fake-cloud ids of the MachineDeployment's machines, by
	// Machine name, once provisioned.
	ids map[string]string

	// The ClusterClass steps' stand-in providers (capi_clusterclass_test.go):
	// the bootstrap data they write, how to stop them, their last error.
	bootstrap   string
	stopStandIn context.CancelFunc
	standInErr  atomic.Value
}

// createBootstrapSecret creates a bootstrap data Secret of
// bootstrapValue; it returns the value.
func (e *env) createBootstrapSecret(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	value := e.bootstrapValue(t)
	_, err := e.kube.CoreV1().Secrets(tenant).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelClusterName: clusterName}},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{"value": []byte(value), "format": []byte("cloud-config")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// bootstrapValue is bootstrap data as a bootstrap provider writes it, with
// a random marker that no file of the repository holds; the marker and
// the base64 of the value join e.forbidden (X1, K5).
func (e *env) bootstrapValue(t *testing.T) string {
	t.Helper()
	marker := make([]byte, 8)
	if _, err := rand.Read(marker); err != nil {
		t.Fatal(err)
	}
	token := "e2e-join-token-" + hex.EncodeToString(marker)
	value := "#cloud-config\nruncmd:\n  - echo " + token + "\n"
	e.forbidden = append(e.forbidden, token, base64.StdEncoding.EncodeToString([]byte(value)))
	return value
}

// provisionCluster: a TerraformCluster and a Cluster without a
// controlPlaneRef, provisioned.
func (r *mdRun) provisionCluster(ctx context.Context, t *testing.T) {
	e := r.env
	e.createTenant(ctx, t)
	e.createIdentity(ctx, t)
	e.forbidden = append(e.forbidden, manifestToken)
	e.createBootstrapSecret(ctx, t, mdBootstrap)

	_, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Create(ctx, &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: tenant},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: identity},
			Source:      v1alpha1.SourceSpec{Image: moduleImage},
			Variables:   variables(t, map[string]any{"name": clusterName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint}),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.clusterID = moduleID(tenant, clusterName)
	created := time.Now()
	e.createCAPI(ctx, t, capiClusterGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": clusterName, "namespace": tenant},
		"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": v1alpha1.KindTerraformCluster, "name": clusterName,
		}},
	})
	e.waitFor(ctx, t, 5*time.Minute, "the Cluster's infrastructure provisioned", func() (bool, string) {
		c, err := e.getObject(ctx, capiClusterGVR, clusterName)
		if err != nil {
			return false, err.Error()
		}
		provisioned, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
		return provisioned, fmt.Sprintf("infrastructureProvisioned %v; TerraformCluster: %s; pods: %s", provisioned, e.clusterConditions(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("the Cluster's infrastructure provisioned %s after the Cluster was created", time.Since(created).Round(time.Millisecond))
}

// threeMachines: a TerraformMachineTemplate and a MachineDeployment of 3
// give 3 provisioned Machines with distinct provider IDs, and 3 machine
// resources in the fake cloud (SPEC K9).
func (r *mdRun) threeMachines(ctx context.Context, t *testing.T) {
	e := r.env
	_, err := e.captf.InfrastructureV1alpha1().TerraformMachineTemplates(tenant).Create(ctx, &v1alpha1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: mdTemplateName, Namespace: tenant},
		Spec: v1alpha1.TerraformMachineTemplateSpec{Template: v1alpha1.TerraformMachineTemplateResource{
			ObjectMeta: v1alpha1.TemplateObjectMeta{Labels: map[string]string{"e2e.captf.io/pool": mdName}},
			Spec: v1alpha1.TerraformMachineSpec{
				IdentityRef: &v1alpha1.IdentityReference{Name: identity},
				Source:      v1alpha1.SourceSpec{Image: moduleImage},
				Variables:   variables(t, map[string]any{"namespace": tenant, "fakecloud_endpoint": cloudEndpoint}),
			},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the TerraformMachineTemplate: %v", err)
	}

	// Complete as Cluster API's defaulting webhook would write it (it is
	// not called here): the labels, the selector, the rollout strategy.
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": clusterName, "cluster.x-k8s.io/deployment-name": mdName}
	created := time.Now()
	e.createCAPI(ctx, t, capiMDGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
		"metadata": map[string]any{"name": mdName, "namespace": tenant, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": clusterName}},
		"spec": map[string]any{
			"clusterName": clusterName,
			"replicas":    int64(3),
			"selector":    map[string]any{"matchLabels": labels},
			"rollout": map[string]any{"strategy": map[string]any{
				"type":          "RollingUpdate",
				"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)},
			}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"clusterName": clusterName,
					"bootstrap":   map[string]any{"dataSecretName": mdBootstrap},
					"infrastructureRef": map[string]any{
						"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": v1alpha1.KindTerraformMachineTemplate, "name": mdTemplateName,
					},
				},
			},
		},
	})

	var machines []unstructured.Unstructured
	e.waitFor(ctx, t, 8*time.Minute, "3 Machines of the MachineDeployment Provisioned with their modules' provider IDs", func() (bool, string) {
		machines = e.mdMachines(ctx, t)
		ok, states := provisionedMachines(machines, 3)
		return ok, fmt.Sprintf("%d Machines %v; objects: %s; pods: %s", len(machines), states, e.capiSummary(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("3 Machines Provisioned %s after the MachineDeployment was created", time.Since(created).Round(time.Millisecond))

	r.ids = map[string]string{}
	pids := map[string]bool{}
	for _, m := range machines {
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		pids[pid] = true
		r.ids[m.GetName()] = moduleID(tenant, m.GetName())
		// Each Machine's TerraformMachine was cloned from the template and
		// is controlled by its Machine (K2), with the template's labels.
		name, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		tm, err := e.captf.InfrastructureV1alpha1().TerraformMachines(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the TerraformMachine of Machine %s: %v", m.GetName(), err)
		}
		if got := tm.Annotations["cluster.x-k8s.io/cloned-from-name"]; got != mdTemplateName {
			t.Errorf("TerraformMachine %s cloned from %q, want the template %s", tm.Name, got, mdTemplateName)
		}
		if tm.Labels["e2e.captf.io/pool"] != mdName {
			t.Errorf("TerraformMachine %s labels %v, want the template's e2e.captf.io/pool=%s", tm.Name, tm.Labels, mdName)
		}
		if c := metav1.GetControllerOf(tm); c == nil || c.Kind != "Machine" || c.Name != m.GetName() || c.UID != m.GetUID() {
			t.Errorf("K2: TerraformMachine %s is controlled by %+v, want Machine %s", tm.Name, c, m.GetName())
		}
		if tm.Spec.ProviderID != pid {
			t.Errorf("K7: TerraformMachine %s spec.providerID %v, want %s", tm.Name, tm.Spec.ProviderID, pid)
		}
		// O6: pinned to the digest its apply ran; its destroy (the scale
		// to one) runs the image by that digest.
		e.waitFor(ctx, t, time.Minute, "O6: TerraformMachine "+tm.Name+" pinned", func() (bool, string) {
			got, err := e.captf.InfrastructureV1alpha1().TerraformMachines(tenant).Get(ctx, tm.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			src := got.Status.Source
			return src != nil && src.Image == moduleImage && src.ImageDigest == e.digests[moduleImage] && src.ImageDigest != "",
				fmt.Sprintf("status.source %+v, want %s at %q", src, moduleImage, e.digests[moduleImage])
		})
	}
	if len(pids) != 3 {
		t.Errorf("K9: the 3 Machines have provider IDs %v, want 3 distinct", pids)
	}
	want := map[string]bool{r.clusterID: true}
	for _, id := range r.ids {
		want[id] = true
	}
	if got := r.cloudIDs(ctx, t); fmt.Sprint(got) != fmt.Sprint(sortedKeys(want)) {
		t.Errorf("the fake cloud holds %v, want the cluster's and the 3 machines' %v", got, sortedKeys(want))
	}
	r.scanJobLogs(ctx, t)
}

// scanJobLogs scans the logs of the tenant's Jobs, while they exist, for
// the credential and the bootstrap data (X1, K5).
func (r *mdRun) scanJobLogs(ctx context.Context, t *testing.T) {
	n := r.scanPodLogs(ctx, t, tenant)
	if n == 0 {
		t.Errorf("X1: no Job log to scan in %s", tenant)
	}
	t.Logf("X1: scanned %d bytes of the Jobs' logs for the credential and the bootstrap data", n)
}

// scaleToOne: the MachineDeployment scaled to 1; Cluster API deletes two
// Machines, their TerraformMachines are destroyed (SPEC K9): one DELETE
// each in the fake cloud, and exactly one machine resource left, the
// remaining Machine's.
func (r *mdRun) scaleToOne(ctx context.Context, t *testing.T) {
	e := r.env
	before := lastSeq(e.cloud.seen(ctx, t))
	start := time.Now()
	e.patchObject(ctx, t, capiMDGVR, mdName, map[string]any{"spec": map[string]any{"replicas": int64(1)}})

	var left []unstructured.Unstructured
	e.waitFor(ctx, t, 6*time.Minute, "the MachineDeployment down to 1 Machine, the others' TerraformMachines gone", func() (bool, string) {
		left = e.mdMachines(ctx, t)
		tms, err := e.captf.InfrastructureV1alpha1().TerraformMachines(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var tmNames []string
		for _, tm := range tms.Items {
			tmNames = append(tmNames, tm.Name)
		}
		return len(left) == 1 && len(tms.Items) == 1, fmt.Sprintf("Machines %d, TerraformMachines %v; objects: %s; pods: %s", len(left), tmNames, e.capiSummary(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("scaled from 3 to 1 Machine, the two others' TerraformMachines destroyed and gone, %s after the patch", time.Since(start).Round(time.Millisecond))

	kept := left[0].GetName()
	if _, ok := r.ids[kept]; !ok {
		t.Fatalf("the Machine left, %s, is not one of the 3 provisioned %v", kept, r.ids)
	}
	if phase, _, _ := unstructured.NestedString(left[0].Object, "status", "phase"); phase != "Provisioned" {
		t.Errorf("the Machine left, %s, is in phase %q, want Provisioned", kept, phase)
	}
	seen := e.cloud.seen(ctx, t)
	for name, id := range r.ids {
		deletes := match{after: before, method: "DELETE", path: "/resources/" + id}.filter(seen)
		switch {
		case name == kept && len(deletes) != 0:
			t.Errorf("the kept Machine %s's resource %s was deleted;%s", name, id, describe(seen))
		case name != kept && (len(deletes) != 1 || deletes[0].Status != 204):
			t.Errorf("K9: want one DELETE of the scaled-down Machine %s's resource %s, answered 204;%s", name, id, describe(seen))
		}
		if puts := (match{after: before, method: "PUT", path: "/resources/" + id}).filter(seen); len(puts) != 0 {
			t.Errorf("scaling down created %s's resource %s again;%s", name, id, describe(seen))
		}
	}
	if got, want := r.cloudIDs(ctx, t), sortedKeys(map[string]bool{r.clusterID: true, r.ids[kept]: true}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("K9: the fake cloud holds %v after the scale-down, want the cluster's and the kept machine's %v", got, want)
	}
}

// deleteCluster: the Cluster deleted, its MachineDeployment, Machines and
// captf's objects go, and the fake cloud holds nothing.
func (r *mdRun) deleteCluster(ctx context.Context, t *testing.T) {
	r.env.deleteClusterAndWait(ctx, t, clusterName, "the Cluster", capiClusterGVR, capiMDGVR, capiMSGVR, capiMachineGVR, tcGVR, tmGVR)
	if got := r.cloudIDs(ctx, t); len(got) != 0 {
		t.Errorf("the fake cloud still holds %v after the Cluster's deletion", got)
	}
}

// deleteClusterAndWait deletes the Cluster name and waits until no object
// of the kinds gvrs is left in the tenant namespace; what names the Cluster
// in messages.
func (e *env) deleteClusterAndWait(ctx context.Context, t *testing.T, name, what string, gvrs ...schema.GroupVersionResource) {
	t.Helper()
	start := time.Now()
	if err := e.dyn.Resource(capiClusterGVR).Namespace(tenant).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, t, 6*time.Minute, what+" and everything of it gone", func() (bool, string) {
		var left []string
		for _, gvr := range gvrs {
			list, err := e.dyn.Resource(gvr).Namespace(tenant).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, u := range list.Items {
				left = append(left, gvr.Resource+"/"+u.GetName())
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v; objects: %s; pods: %s", left, e.capiSummary(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("%s and everything of it gone %s after its deletion", what, time.Since(start).Round(time.Millisecond))
}

// mdMachines lists the MachineDeployment's Machines, by name.
func (e *env) mdMachines(ctx context.Context, t *testing.T) []unstructured.Unstructured {
	t.Helper()
	list, err := e.dyn.Resource(capiMachineGVR).Namespace(tenant).List(ctx, metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/deployment-name=" + mdName})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].GetName() < list.Items[j].GetName() })
	return list.Items
}

// cloudIDs is the fake cloud's resource ids, sorted.
func (r *mdRun) cloudIDs(ctx context.Context, t *testing.T) []string {
	ids := map[string]bool{}
	for _, res := range r.cloud.resources(ctx, t, manifestToken) {
		ids[res.ID] = true
	}
	return sortedKeys(ids)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// provisionedMachines reports whether there are want Machines, each in
// phase Provisioned with the provider ID the e2e module makes from its
// name, and describes each.
func provisionedMachines(machines []unstructured.Unstructured, want int) (bool, []string) {
	ok := len(machines) == want
	var states []string
	for _, m := range machines {
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		if phase != "Provisioned" || pid != "fakecloud:///"+moduleID(tenant, m.GetName()) {
			ok = false
		}
		states = append(states, fmt.Sprintf("%s phase %q providerID %q", m.GetName(), phase, pid))
	}
	return ok, states
}
