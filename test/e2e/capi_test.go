package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/fakecloud"
)

// TestCAPIClusterAndMachine is issue 21's end-to-end proof (SPEC K12, with
// K2-K5, K7, K8): Cluster API v1.14's core manager (bin/capi-manager, a
// local process as the admin, its CRDs from bin/capi-crds) runs beside
// captf's manager deployed in-cluster from manifests/, and drives captf's
// objects on a real node, the Jobs running OpenTofu with the test module
// against the fake cloud:
//
//   - a Cluster whose infrastructureRef is a TerraformCluster reaches
//     status.initialization.infrastructureProvisioned and
//     InfrastructureReady=True with the module's control_plane_endpoint;
//   - a Machine with spec.bootstrap.dataSecretName and a TerraformMachine
//     reaches phase Provisioned with the module's provider_id, after the
//     cluster (K4); the module got machine_name and bootstrap_data (K5,
//     K6), and the fake cloud holds the bootstrap data intact;
//   - a spec change of both re-applies while watches on the four objects
//     see every version: the Cluster's InfrastructureReady and the
//     Machine's InfrastructureReady stay True, the Machine's Ready keeps
//     what it was, captf's Ready stays True (K8);
//   - Cluster.spec.paused: a spec change starts no Job; unpaused, it is
//     applied (K3);
//   - no credential or bootstrap data in any Job's or the manager's log,
//     any event, Job or object (X1, K5);
//   - deleting the Cluster destroys the machine before the cluster (the
//     fake cloud's request log) and leaves nothing in the fake cloud (K4).
//
// The Machine's own Ready also needs a Node of the workload cluster (there
// is none: no control plane provider, no kubeconfig), so it is not True
// here; the test checks it does not change through the re-apply.
func TestCAPIClusterAndMachine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	begin := time.Now()
	e, cp := start(ctx, t, true)
	defer func() {
		if t.Failed() && !cp.Stopped() {
			e.dumpState(t)
		}
	}()

	r := &capiRun{env: e}
	e.runSteps(ctx, t, cp, []step{
		{"Provision", r.provision},
		{"ReapplyKeepsReady", r.reapply},
		{"PauseStopsJobs", r.pause},
		{"NoSecretInJobsLogsOrObjects", r.noSecrets},
		{"DeleteDestroysMachinesFirst", r.deletion},
		{"NoSecretInManagerLogsOrEvents", e.noCredentialInLogs},
	})
	t.Logf("TestCAPIClusterAndMachine took %s in all", time.Since(begin).Round(time.Millisecond))
}

const (
	// machineName names the Machine and its TerraformMachine.
	machineName     = "m1"
	bootstrapSecret = "m1-bootstrap"
	// manifestToken is the fake cloud's credential as
	// test/e2e/manifests/fakecloud.yaml ships it (a made-up value).
	manifestToken = "sample-fakecloud-token-not-a-secret"
)

var (
	capiClusterGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	capiMachineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	tcGVR          = v1alpha1.SchemeGroupVersion.WithResource("terraformclusters")
	tmGVR          = v1alpha1.SchemeGroupVersion.WithResource("terraformmachines")
)

// capiRun is what the steps share.
type capiRun struct {
	*env
	tcUID, tmUID types.UID
	// bootstrap is the bootstrap data Secret's value; the module gets it
	// base64-encoded (SPEC K5).
	bootstrap string
	clusterID string
	machineID string
	// controlPlane labels the Machine a control-plane machine: with its
	// nodeRef, Cluster API then counts the control plane initialized,
	// which clusterctl move requires (capi_move_test.go).
	controlPlane bool
}

func (r *capiRun) provision(ctx context.Context, t *testing.T) {
	e := r.env
	e.createTenant(ctx, t)
	e.createIdentity(ctx, t)

	// The bootstrap data as a bootstrap provider writes it, with a marker
	// no file of the repository holds, for the X1 scans.
	marker := make([]byte, 8)
	if _, err := rand.Read(marker); err != nil {
		t.Fatal(err)
	}
	r.bootstrap = "#cloud-config\nruncmd:\n  - echo e2e-join-token-" + hex.EncodeToString(marker) + "\n"
	e.forbidden = []string{manifestToken, "e2e-join-token-" + hex.EncodeToString(marker), base64.StdEncoding.EncodeToString([]byte(r.bootstrap))}
	_, err := e.kube.CoreV1().Secrets(tenant).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapSecret, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelClusterName: clusterName}},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{"value": []byte(r.bootstrap), "format": []byte("cloud-config")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// captf's objects, not standalone: Cluster API owns them. The machine
	// names no resource: the module takes the contract input machine_name.
	tc, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Create(ctx, &v1alpha1.TerraformCluster{
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
	tm, err := e.captf.InfrastructureV1alpha1().TerraformMachines(tenant).Create(ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: machineName, Namespace: tenant},
		Spec: v1alpha1.TerraformMachineSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: identity},
			Source:      v1alpha1.SourceSpec{Image: moduleImage},
			Variables:   variables(t, map[string]any{"namespace": tenant, "fakecloud_endpoint": cloudEndpoint}),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.tcUID, r.tmUID = tc.UID, tm.UID
	r.clusterID, r.machineID = moduleID(tenant, clusterName), moduleID(tenant, machineName)

	// Cluster API's objects, complete as written (no webhook defaults them).
	created := time.Now()
	e.createCAPI(ctx, t, capiClusterGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": clusterName, "namespace": tenant},
		"spec": map[string]any{"infrastructureRef": map[string]any{
			"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": v1alpha1.KindTerraformCluster, "name": clusterName,
		}},
	})
	machineMeta := map[string]any{"name": machineName, "namespace": tenant}
	if r.controlPlane {
		machineMeta["labels"] = map[string]any{"cluster.x-k8s.io/control-plane": ""}
	}
	e.createCAPI(ctx, t, capiMachineGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
		"metadata": machineMeta,
		"spec": map[string]any{
			"clusterName": clusterName,
			"bootstrap":   map[string]any{"dataSecretName": bootstrapSecret},
			"infrastructureRef": map[string]any{
				"apiGroup": v1alpha1.SchemeGroupVersion.Group, "kind": v1alpha1.KindTerraformMachine, "name": machineName,
			},
		},
	})

	wantHost := r.clusterID + ".fakecloud.test"
	e.waitFor(ctx, t, 5*time.Minute, "the Cluster's infrastructure provisioned and InfrastructureReady=True with the module's endpoint", func() (bool, string) {
		c, err := e.getObject(ctx, capiClusterGVR, clusterName)
		if err != nil {
			return false, err.Error()
		}
		provisioned, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
		host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
		port, _, _ := unstructured.NestedInt64(c.Object, "spec", "controlPlaneEndpoint", "port")
		ready := findCondition(c, "InfrastructureReady")
		return provisioned && host == wantHost && port == 6443 && ready["status"] == "True",
			fmt.Sprintf("infrastructureProvisioned %v, controlPlaneEndpoint %s:%d, InfrastructureReady %v; TerraformCluster: %s; pods: %s",
				provisioned, host, port, ready, e.clusterConditions(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("the Cluster's infrastructure provisioned and ready %s after the Cluster was created", time.Since(created).Round(time.Millisecond))

	wantPID := "fakecloud:///" + r.machineID
	var machine *unstructured.Unstructured
	e.waitFor(ctx, t, 5*time.Minute, "the Machine Provisioned with the module's provider ID", func() (bool, string) {
		m, err := e.getObject(ctx, capiMachineGVR, machineName)
		if err != nil {
			return false, err.Error()
		}
		machine = m
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		return pid == wantPID && phase == "Provisioned",
			fmt.Sprintf("spec.providerID %q, phase %q, InfrastructureReady %v; TerraformMachine: %s; pods: %s",
				pid, phase, findCondition(m, "InfrastructureReady"), e.conditionsOf(ctx, tmGVR, machineName), e.podSummary(ctx, tenant))
	})
	t.Logf("the Machine Provisioned %s after it was created", time.Since(created).Round(time.Millisecond))
	addrs, _, _ := unstructured.NestedSlice(machine.Object, "status", "addresses")
	if len(addrs) != 1 || fmt.Sprint(addrs[0]) != fmt.Sprint(map[string]any{"type": "InternalDNS", "address": r.machineID + ".fakecloud.test"}) {
		t.Errorf("K7: the Machine's status.addresses %v, want the module's InternalDNS %s.fakecloud.test", addrs, r.machineID)
	}

	// K4: the machine's first apply started once the cluster's had
	// succeeded (timestamps have a second's resolution).
	cj := e.jobsOf(ctx, t, r.tcUID, v1alpha1.JobActionApply)
	mj := e.jobsOf(ctx, t, r.tmUID, v1alpha1.JobActionApply)
	if len(cj) == 0 || len(mj) == 0 {
		t.Fatalf("%d apply Jobs of the cluster and %d of the machine after both were provisioned", len(cj), len(mj))
	}
	if len(cj) != 1 || len(mj) != 1 {
		t.Errorf("%d apply Jobs of the cluster and %d of the machine, want one each (J1; K6: Cluster API's copy of the endpoint is no new input)", len(cj), len(mj))
	}
	if done := cj[0].Status.CompletionTime; done == nil || mj[0].CreationTimestamp.Before(done) {
		t.Errorf("K4: the machine's apply Job %s was created at %s, before the cluster's %s completed (%v)", mj[0].Name, mj[0].CreationTimestamp, cj[0].Name, done)
	}

	// K5, K6: the fake cloud holds the machine, named by machine_name,
	// with the bootstrap data intact (base64, as the contract passes it).
	want := base64.StdEncoding.EncodeToString([]byte(r.bootstrap))
	sum := sha256.Sum256([]byte(want))
	byID := map[string]fakecloud.Resource{}
	for _, res := range e.cloud.resources(ctx, t, manifestToken) {
		byID[res.ID] = res
	}
	if len(byID) != 2 {
		t.Errorf("the fake cloud holds %v, want the cluster's %s and the machine's %s", byID, r.clusterID, r.machineID)
	}
	if res := byID[r.machineID]; res.Name != machineName || res.BootstrapDataBytes != len(want) || res.BootstrapDataSHA256 != hex.EncodeToString(sum[:]) || res.BootstrapFormat != "cloud-config" {
		t.Errorf("K5, K6: the machine's resource %+v, want name %s (machine_name) and %d bytes of bootstrap data in format cloud-config", res, machineName, len(want))
	}
	if res := byID[r.clusterID]; res.Name != clusterName || res.BootstrapDataBytes != 0 {
		t.Errorf("the cluster's resource %+v, want name %s and no bootstrap data", res, clusterName)
	}
	var got fakecloud.BootstrapData
	if err := e.cloud.get(ctx, "/resources/"+r.machineID+"/bootstrap-data", manifestToken, &got); err != nil {
		t.Fatal(err)
	}
	if got.BootstrapData != want || got.BootstrapFormat != "cloud-config" {
		t.Errorf("K5: the fake cloud holds bootstrap data of %d bytes in format %q, want the Secret's value base64-encoded (%d bytes), cloud-config", len(got.BootstrapData), got.BootstrapFormat, len(want))
	}
}

// reapply: a spec change of the cluster and the machine re-applies both
// while watches see every version of the four objects (SPEC K8).
func (r *capiRun) reapply(ctx context.Context, t *testing.T) {
	e := r.env
	m, err := e.getObject(ctx, capiMachineGVR, machineName)
	if err != nil {
		t.Fatal(err)
	}
	before := findCondition(m, "Ready")
	t.Logf("the Machine's Ready before the re-apply: %v", before)
	beforeSeq := lastSeq(e.cloud.seen(ctx, t))

	captfReady := func(u *unstructured.Unstructured) (string, string) {
		note := ""
		if c := findCondition(u, string(v1alpha1.ConditionApplyJobSucceeded)); c != nil {
			note = fmt.Sprintf("ApplyJobSucceeded=%v/%v", c["status"], c["reason"])
		}
		if c := findCondition(u, string(v1alpha1.ConditionReady)); c["status"] != "True" {
			return fmt.Sprintf("Ready %v", c), note
		}
		return "", note
	}
	watches := []*holdWatch{
		e.hold(ctx, t, capiClusterGVR, clusterName, func(u *unstructured.Unstructured) (string, string) {
			provisioned, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "infrastructureProvisioned")
			if c := findCondition(u, "InfrastructureReady"); c["status"] != "True" || !provisioned {
				return fmt.Sprintf("InfrastructureReady %v, infrastructureProvisioned %v", c, provisioned), ""
			}
			return "", ""
		}),
		e.hold(ctx, t, capiMachineGVR, machineName, func(u *unstructured.Unstructured) (string, string) {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			infra, ready := findCondition(u, "InfrastructureReady"), findCondition(u, "Ready")
			if infra["status"] != "True" || ready["status"] != before["status"] || phase != "Provisioned" {
				return fmt.Sprintf("InfrastructureReady %v, Ready %v, phase %s", infra, ready, phase), ""
			}
			return "", ""
		}),
		e.hold(ctx, t, tcGVR, clusterName, captfReady),
		e.hold(ctx, t, tmGVR, machineName, captfReady),
	}

	gc := e.setVariables(ctx, t, tcGVR, clusterName, map[string]any{"name": clusterName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "credential_checks": []string{"reapply"}})
	gm := e.setVariables(ctx, t, tmGVR, machineName, map[string]any{"namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "credential_checks": []string{"reapply"}})
	for _, j := range []batchv1.Job{
		e.waitJobOfGeneration(ctx, t, r.tcUID, v1alpha1.JobActionApply, gc),
		e.waitJobOfGeneration(ctx, t, r.tmUID, v1alpha1.JobActionApply, gm),
	} {
		if done := e.waitJobDone(ctx, t, j.Name, 5*time.Minute); !jobSucceeded(done) {
			t.Fatalf("the re-apply Job %s: %s; pods: %s", j.Name, jobState(done), e.podSummary(ctx, tenant))
		}
	}
	e.waitCondition(ctx, t, tcGVR, clusterName, v1alpha1.ConditionApplyJobSucceeded, "True", gc)
	e.waitCondition(ctx, t, tmGVR, machineName, v1alpha1.ConditionApplyJobSucceeded, "True", gm)
	// Cluster API reconciles what captf wrote after the runs: the watches
	// stay open a while longer.
	time.Sleep(10 * time.Second)

	for _, w := range watches {
		versions, problems, notes := w.stop()
		t.Logf("K8: %s: %d versions seen; %v", w.what, versions, notes)
		for _, p := range problems {
			t.Errorf("K8: %s during the re-apply: %s", w.what, p)
		}
		if strings.HasPrefix(w.what, "terraform") && !notes["ApplyJobSucceeded=Unknown/"+string(v1alpha1.ReasonJobRunning)] {
			t.Errorf("K8: the watch on %s never saw the re-apply running (%v): it proves nothing", w.what, notes)
		}
	}

	// The module ran (its credential check asked the fake cloud) and the
	// machine kept its resource: no second create.
	seen := e.cloud.seen(ctx, t)
	if who := (match{after: beforeSeq, method: "GET", path: "/whoami"}).filter(seen); len(who) != 4 {
		t.Errorf("the re-applies' credential checks: %d whoami requests, want 4 (env and file, cluster and machine);%s", len(who), describe(seen))
	}
	if puts := (match{after: beforeSeq, method: "PUT", path: "/resources/" + r.machineID}).filter(seen); len(puts) != 0 {
		t.Errorf("the machine's re-apply created its resource again;%s", describe(seen))
	}
}

// pause: with Cluster.spec.paused a spec change of the cluster and of the
// machine starts no Job; unpaused, both apply it (SPEC K3).
func (r *capiRun) pause(ctx context.Context, t *testing.T) {
	e := r.env
	e.patchObject(ctx, t, capiClusterGVR, clusterName, map[string]any{"spec": map[string]any{"paused": true}})
	// Once the manager says so: its caches of Clusters and of its own
	// objects are not updated in the order of the writes.
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{tcGVR, clusterName}, {tmGVR, machineName}} {
		u, err := e.getObject(ctx, o.gvr, o.name)
		if err != nil {
			t.Fatal(err)
		}
		e.waitCondition(ctx, t, o.gvr, o.name, v1alpha1.ConditionPaused, "True", u.GetGeneration())
	}
	gc := e.setVariables(ctx, t, tcGVR, clusterName, map[string]any{"name": clusterName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "credential_checks": []string{"reapply", "after-pause"}})
	gm := e.setVariables(ctx, t, tmGVR, machineName, map[string]any{"namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "credential_checks": []string{"reapply", "after-pause"}})
	// The manager has seen the new generations, paused.
	e.waitCondition(ctx, t, tcGVR, clusterName, v1alpha1.ConditionPaused, "True", gc)
	e.waitCondition(ctx, t, tmGVR, machineName, v1alpha1.ConditionPaused, "True", gm)
	start := time.Now()
	for time.Since(start) < 15*time.Second {
		for _, o := range []struct {
			uid types.UID
			gen int64
		}{{r.tcUID, gc}, {r.tmUID, gm}} {
			for _, j := range e.jobsOf(ctx, t, o.uid, "") {
				if g, _ := jobs.GenerationOf(&j); g == o.gen {
					t.Fatalf("K3: Job %s started for generation %d while the Cluster is paused", j.Name, g)
				}
			}
		}
		time.Sleep(time.Second)
	}

	e.patchObject(ctx, t, capiClusterGVR, clusterName, map[string]any{"spec": map[string]any{"paused": false}})
	for _, j := range []batchv1.Job{
		e.waitJobOfGeneration(ctx, t, r.tcUID, v1alpha1.JobActionApply, gc),
		e.waitJobOfGeneration(ctx, t, r.tmUID, v1alpha1.JobActionApply, gm),
	} {
		if done := e.waitJobDone(ctx, t, j.Name, 5*time.Minute); !jobSucceeded(done) {
			t.Fatalf("the apply Job %s after the pause: %s; pods: %s", j.Name, jobState(done), e.podSummary(ctx, tenant))
		}
	}
	e.waitCondition(ctx, t, tcGVR, clusterName, v1alpha1.ConditionPaused, "False", gc)
	e.waitCondition(ctx, t, tmGVR, machineName, v1alpha1.ConditionPaused, "False", gm)
	e.waitCondition(ctx, t, tcGVR, clusterName, v1alpha1.ConditionApplyJobSucceeded, "True", gc)
	e.waitCondition(ctx, t, tmGVR, machineName, v1alpha1.ConditionApplyJobSucceeded, "True", gm)
}

// noSecrets (X1, K5): neither the credential nor the bootstrap data (raw
// or base64) is in any Job's pod log, any Job, or any of the objects;
// the run Secrets that carried it are gone.
func (r *capiRun) noSecrets(ctx context.Context, t *testing.T) {
	e := r.env
	n := e.scanPodLogs(ctx, t, tenant)
	list, err := e.kube.BatchV1().Jobs(tenant).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		b, _ := json.Marshal(j)
		e.scan(t, "Job "+j.Name, b)
		if _, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, jobs.RunSecretName(j.Name), metav1.GetOptions{}); !apierrors.IsNotFound(err) && jobFinished(&j) {
			t.Errorf("K5: the run Secret of the finished Job %s: %v, want NotFound", j.Name, err)
		}
	}
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{tcGVR, clusterName}, {tmGVR, machineName}, {capiClusterGVR, clusterName}, {capiMachineGVR, machineName}} {
		u, err := e.getObject(ctx, o.gvr, o.name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(u.Object)
		e.scan(t, o.gvr.Resource+"/"+o.name, b)
	}
	if n == 0 || len(list.Items) < 4 {
		t.Fatalf("X1: nothing to scan (%d bytes of the Jobs' logs, %d Jobs)", n, len(list.Items))
	}
	t.Logf("X1: scanned %d bytes of the Jobs' logs and %d Jobs for the credential and the bootstrap data", n, len(list.Items))
}

// deletion: deleting the Cluster destroys the machine, then the cluster
// (SPEC K4): the fake cloud saw the machine's DELETE before the
// cluster's, and holds nothing afterwards.
func (r *capiRun) deletion(ctx context.Context, t *testing.T) {
	e := r.env
	before := lastSeq(e.cloud.seen(ctx, t))
	start := time.Now()
	if err := e.dyn.Resource(capiClusterGVR).Namespace(tenant).Delete(ctx, clusterName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, t, 5*time.Minute, "the Cluster, its Machine and captf's objects gone", func() (bool, string) {
		var left []string
		for _, o := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{capiClusterGVR, clusterName}, {capiMachineGVR, machineName}, {tcGVR, clusterName}, {tmGVR, machineName}} {
			if _, err := e.getObject(ctx, o.gvr, o.name); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s/%s (%v)", o.gvr.Resource, o.name, err))
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v; objects: %s; pods: %s", left, e.capiSummary(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("the Cluster and everything of it gone %s after its deletion", time.Since(start).Round(time.Millisecond))

	seen := e.cloud.seen(ctx, t)
	dm := match{after: before, method: "DELETE", path: "/resources/" + r.machineID}.filter(seen)
	dc := match{after: before, method: "DELETE", path: "/resources/" + r.clusterID}.filter(seen)
	if len(dm) != 1 || len(dc) != 1 || dm[0].Status != 204 || dc[0].Status != 204 {
		t.Fatalf("want one DELETE of the machine %s and one of the cluster %s, each answered 204;%s", r.machineID, r.clusterID, describe(seen))
	}
	if dm[0].Seq > dc[0].Seq {
		t.Errorf("K4: the cluster's resource was deleted (request #%d) before the machine's (#%d)", dc[0].Seq, dm[0].Seq)
	}
	if res := e.cloud.resources(ctx, t, manifestToken); len(res) != 0 {
		t.Errorf("the fake cloud still holds %+v after the Cluster's deletion", res)
	}
	for _, o := range []struct{ kind, name string }{{v1alpha1.KindTerraformCluster, clusterName}, {v1alpha1.KindTerraformMachine, machineName}} {
		name := tfstate.SecretName(jobs.StateSuffix(o.kind, o.name))
		if _, err := e.kube.CoreV1().Secrets(tenant).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("T2: the state Secret %s of %s %s after the destroy: %v, want NotFound", name, o.kind, o.name, err)
		}
	}
}

// --- Cluster API's objects and captf's, read and written with the
// dynamic client ---

func (e *env) createCAPI(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, obj map[string]any) {
	t.Helper()
	if _, err := e.dyn.Resource(gvr).Namespace(tenant).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s: %v", gvr.Resource, err)
	}
}

// getObject reads gvr/name in the tenant.
func (e *env) getObject(ctx context.Context, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	return e.dyn.Resource(gvr).Namespace(tenant).Get(ctx, name, metav1.GetOptions{})
}

// patchObject applies a JSON merge patch; it returns the new generation.
func (e *env) patchObject(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, name string, patch map[string]any) int64 {
	t.Helper()
	b, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	u, err := e.dyn.Resource(gvr).Namespace(tenant).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patching %s/%s: %v", gvr.Resource, name, err)
	}
	return u.GetGeneration()
}

// setVariables replaces spec.variables of one of captf's objects; it
// returns the new generation.
func (e *env) setVariables(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, name string, vars map[string]any) int64 {
	t.Helper()
	return e.patchObject(ctx, t, gvr, name, map[string]any{"spec": map[string]any{"variables": vars}})
}

// findCondition returns condition typ of an object, nil when absent.
func findCondition(u *unstructured.Unstructured, typ string) map[string]any {
	return clusterctltest.Condition(u, typ)
}

// conditionsOf describes an object's conditions for messages.
func (e *env) conditionsOf(ctx context.Context, gvr schema.GroupVersionResource, name string) string {
	u, err := e.getObject(ctx, gvr, name)
	if err != nil {
		return err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			parts = append(parts, fmt.Sprintf("%v=%v/%v (%v)", m["type"], m["status"], m["reason"], m["message"]))
		}
	}
	return strings.Join(parts, "; ")
}

// capiSummary describes the test's objects of both APIs.
func (e *env) capiSummary(ctx context.Context) string {
	var b strings.Builder
	for _, gvr := range []schema.GroupVersionResource{capiClusterGVR, capiMDGVR, capiMSGVR, capiMachineGVR, tcGVR, tmGVR} {
		list, err := e.dyn.Resource(gvr).Namespace(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", gvr.Resource, err)
			continue
		}
		for _, u := range list.Items {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			fmt.Fprintf(&b, "\n  %s/%s phase %q deleting %v finalizers %v: %s", gvr.Resource, u.GetName(), phase,
				u.GetDeletionTimestamp() != nil, u.GetFinalizers(), e.conditionsOf(ctx, gvr, u.GetName()))
		}
	}
	return b.String()
}

// waitCondition waits until condition typ of gvr/name has status for
// generation gen (observedGeneration).
func (e *env) waitCondition(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, name string, typ v1alpha1.ConditionType, status string, gen int64) {
	t.Helper()
	e.waitFor(ctx, t, 3*time.Minute, fmt.Sprintf("%s/%s %s=%s at generation %d", gvr.Resource, name, typ, status, gen), func() (bool, string) {
		u, err := e.getObject(ctx, gvr, name)
		if err != nil {
			return false, err.Error()
		}
		c := findCondition(u, string(typ))
		g, _ := c["observedGeneration"].(int64)
		return c["status"] == status && g == gen, e.conditionsOf(ctx, gvr, name)
	})
}

// waitJobOfGeneration waits for a Job of owner with action made for
// generation gen.
func (e *env) waitJobOfGeneration(ctx context.Context, t *testing.T, owner types.UID, action v1alpha1.JobAction, gen int64) batchv1.Job {
	t.Helper()
	var found batchv1.Job
	e.waitFor(ctx, t, 2*time.Minute, fmt.Sprintf("a %s Job of generation %d", action, gen), func() (bool, string) {
		var names []string
		for _, j := range e.jobsOf(ctx, t, owner, action) {
			if g, ok := jobs.GenerationOf(&j); ok && g == gen {
				found = j
				return true, ""
			}
			names = append(names, j.Name)
		}
		return false, fmt.Sprintf("Jobs %v; objects: %s", names, e.capiSummary(ctx))
	})
	return found
}

// holdWatch watches one object and checks every version it sees: what
// must hold throughout (SPEC K8), not only when polled.
type holdWatch struct {
	what   string
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	versions int
	problems []string
	notes    map[string]bool
}

// hold starts a watch of gvr/name from its current version; check returns
// a problem ("" none) and a note to collect ("" none) for each version.
func (e *env) hold(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, name string, check func(*unstructured.Unstructured) (string, string)) *holdWatch {
	t.Helper()
	res := e.dyn.Resource(gvr).Namespace(tenant)
	cur, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &holdWatch{what: gvr.Resource + "/" + name, cancel: cancel, done: make(chan struct{}), notes: map[string]bool{}}
	h.see(cur, check)
	w, err := res.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: cur.GetResourceVersion()})
	if err != nil {
		cancel()
		t.Fatalf("watching %s: %v", h.what, err)
	}
	go func() {
		defer close(h.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						h.add("the watch closed early", "")
					}
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if u, ok := ev.Object.(*unstructured.Unstructured); ok {
						h.see(u, check)
					}
				case watch.Deleted:
					h.add("deleted", "")
				case watch.Error:
					h.add(fmt.Sprintf("watch error: %v", apierrors.FromObject(ev.Object)), "")
					return
				}
			}
		}
	}()
	return h
}

func (h *holdWatch) see(u *unstructured.Unstructured, check func(*unstructured.Unstructured) (string, string)) {
	problem, note := check(u)
	h.mu.Lock()
	h.versions++
	h.mu.Unlock()
	if problem != "" {
		problem = fmt.Sprintf("version %s: %s", u.GetResourceVersion(), problem)
	}
	h.add(problem, note)
}

func (h *holdWatch) add(problem, note string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if problem != "" {
		h.problems = append(h.problems, problem)
	}
	if note != "" {
		h.notes[note] = true
	}
}

// stop ends the watch; it returns the versions seen, the problems and
// the notes.
func (h *holdWatch) stop() (int, []string, map[string]bool) {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.versions, h.problems, h.notes
}
