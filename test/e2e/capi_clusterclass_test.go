package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
)

// The ClusterClass steps of TestCAPITemplates (SPEC K9, K12): a
// ClusterClass built from a TerraformClusterTemplate (no identityRef: the
// class's patch sets it from the topology variable identityName), a
// TerraformMachineTemplate for its MachineDeployment class, and a control
// plane and bootstrap template, creates through Cluster.spec.topology a
// Cluster whose TerraformCluster is provisioned with the patched identity
// and whose MachineDeployment's Machines are provisioned, each with its
// own provider ID; deleting the Cluster leaves nothing in the fake cloud.
//
// A ClusterClass must name a control plane template and, for each
// MachineDeployment class, a bootstrap template (Cluster API v1beta2
// requires both), and the topology controller creates no MachineDeployment
// until the control plane reports a version (status.version: "the control
// plane is provisioning" until then). Only Cluster API's core manager runs
// here: the test stands in for a control plane and a bootstrap provider,
// with CRDs of its own (e2e.captf.io) labelled for contract v1beta2, and
// writes what such providers write: the control plane's status.version and
// status.initialization.controlPlaneInitialized, each bootstrap config's
// data Secret, status.dataSecretName and
// status.initialization.dataSecretCreated. captf sees none of this: it
// gets the Cluster, the Machines and their bootstrap data Secrets as it
// would with kubeadm's providers.

const (
	ccName        = "cc"
	ccClassName   = "terraform-e2e"
	ccVersion     = "v1.34.0"
	ccMDTopology  = "md-0"
	ccClusterTmpl = "cc-cluster"
	ccWorkerTmpl  = "cc-worker"
	ccReplicas    = 2
)

var (
	capiClusterClassGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusterclasses"}
	stubCPGVR           = schema.GroupVersionResource{Group: "controlplane.e2e.captf.io", Version: "v1alpha1", Resource: "e2econtrolplanes"}
	stubCPTemplateGVR   = schema.GroupVersionResource{Group: "controlplane.e2e.captf.io", Version: "v1alpha1", Resource: "e2econtrolplanetemplates"}
	stubConfigGVR       = schema.GroupVersionResource{Group: "bootstrap.e2e.captf.io", Version: "v1alpha1", Resource: "e2econfigs"}
	stubConfigTmplGVR   = schema.GroupVersionResource{Group: "bootstrap.e2e.captf.io", Version: "v1alpha1", Resource: "e2econfigtemplates"}
)

// stubCRD is a CRD of the stand-in providers: any spec and status, the
// status subresource, the contract label Cluster API looks up.
const stubCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[2]s
  labels:
    cluster.x-k8s.io/v1beta2: v1alpha1
spec:
  group: %[2]s
  scope: Namespaced
  names: {kind: %[3]s, listKind: %[3]sList, plural: %[1]s, singular: %[4]s}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// clusterClassTopology creates the stand-ins' CRDs, the templates, the
// ClusterClass and a Cluster with a topology, and waits until the
// TerraformCluster the topology made is provisioned with the identity the
// class's patch set, and the Cluster with it.
func (r *mdRun) clusterClassTopology(ctx context.Context, t *testing.T) {
	e := r.env
	dir := t.TempDir()
	var b strings.Builder
	for _, g := range []schema.GroupVersionResource{stubCPGVR, stubCPTemplateGVR, stubConfigGVR, stubConfigTmplGVR} {
		kind := map[string]string{
			"e2econtrolplanes": "E2EControlPlane", "e2econtrolplanetemplates": "E2EControlPlaneTemplate",
			"e2econfigs": "E2EConfig", "e2econfigtemplates": "E2EConfigTemplate",
		}[g.Resource]
		fmt.Fprintf(&b, "---\n"+stubCRD, g.Resource, g.Group, kind, strings.ToLower(kind))
	}
	if err := os.WriteFile(filepath.Join(dir, "stubs.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := controlplane.ApplyCRDs(ctx, e.cp.RestConfig(controlplane.Admin), dir); err != nil {
		t.Fatalf("the stand-in providers' CRDs: %v", err)
	}
	e.createCAPI(ctx, t, stubCPTemplateGVR, map[string]any{
		"apiVersion": stubCPTemplateGVR.GroupVersion().String(), "kind": "E2EControlPlaneTemplate",
		"metadata": map[string]any{"name": "cc-control-plane"},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
	})
	e.createCAPI(ctx, t, stubConfigTmplGVR, map[string]any{
		"apiVersion": stubConfigTmplGVR.GroupVersion().String(), "kind": "E2EConfigTemplate",
		"metadata": map[string]any{"name": "cc-worker"},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{}}},
	})
	r.bootstrap = e.bootstrapValue(t)
	standCtx, stop := context.WithCancel(ctx)
	r.stopStandIn = stop
	go r.standIn(standCtx)

	// captf's templates: the cluster's leaves identityRef to the class's
	// patch (its webhook admits that with a warning); the machines' names
	// none either: they follow their cluster's (I2).
	_, err := e.captf.InfrastructureV1alpha1().TerraformClusterTemplates(tenant).Create(ctx, &v1alpha1.TerraformClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: ccClusterTmpl, Namespace: tenant},
		Spec: v1alpha1.TerraformClusterTemplateSpec{Template: v1alpha1.TerraformClusterTemplateResource{
			Spec: v1alpha1.TerraformClusterSpec{
				Source:    v1alpha1.SourceSpec{Image: moduleImage},
				Variables: variables(t, map[string]any{"name": ccName, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint}),
			},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the TerraformClusterTemplate: %v", err)
	}
	_, err = e.captf.InfrastructureV1alpha1().TerraformMachineTemplates(tenant).Create(ctx, &v1alpha1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: ccWorkerTmpl, Namespace: tenant},
		Spec: v1alpha1.TerraformMachineTemplateSpec{Template: v1alpha1.TerraformMachineTemplateResource{
			Spec: v1alpha1.TerraformMachineSpec{
				Source:    v1alpha1.SourceSpec{Image: moduleImage},
				Variables: variables(t, map[string]any{"namespace": tenant, "fakecloud_endpoint": cloudEndpoint}),
			},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the TerraformMachineTemplate: %v", err)
	}

	infra := v1alpha1.SchemeGroupVersion.String()
	e.createCAPI(ctx, t, capiClusterClassGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
		"metadata": map[string]any{"name": ccClassName, "namespace": tenant},
		"spec": map[string]any{
			"infrastructure": map[string]any{"templateRef": map[string]any{"apiVersion": infra, "kind": v1alpha1.KindTerraformClusterTemplate, "name": ccClusterTmpl}},
			"controlPlane": map[string]any{"templateRef": map[string]any{
				"apiVersion": stubCPTemplateGVR.GroupVersion().String(), "kind": "E2EControlPlaneTemplate", "name": "cc-control-plane",
			}},
			"workers": map[string]any{"machineDeployments": []any{map[string]any{
				"class": "default-worker",
				"bootstrap": map[string]any{"templateRef": map[string]any{
					"apiVersion": stubConfigTmplGVR.GroupVersion().String(), "kind": "E2EConfigTemplate", "name": "cc-worker",
				}},
				"infrastructure": map[string]any{"templateRef": map[string]any{"apiVersion": infra, "kind": v1alpha1.KindTerraformMachineTemplate, "name": ccWorkerTmpl}},
			}}},
			"variables": []any{map[string]any{
				"name": "identityName", "required": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "string", "minLength": int64(1)}},
			}},
			"patches": []any{map[string]any{
				"name": "identity",
				"definitions": []any{map[string]any{
					"selector": map[string]any{
						"apiVersion": infra, "kind": v1alpha1.KindTerraformClusterTemplate,
						"matchResources": map[string]any{"infrastructureCluster": true},
					},
					"jsonPatches": []any{map[string]any{
						"op": "add", "path": "/spec/template/spec/identityRef",
						"valueFrom": map[string]any{"template": "name: {{ .identityName }}"},
					}},
				}},
			}},
		},
	})

	created := time.Now()
	e.createCAPI(ctx, t, capiClusterGVR, map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": ccName, "namespace": tenant},
		"spec": map[string]any{"topology": map[string]any{
			"classRef": map[string]any{"name": ccClassName},
			"version":  ccVersion,
			"workers": map[string]any{"machineDeployments": []any{map[string]any{
				"class": "default-worker", "name": ccMDTopology, "replicas": int64(ccReplicas),
				// What Cluster API's defaulting webhook writes into the
				// MachineDeployment (not called here: its controller
				// refuses an empty strategy type).
				"rollout": map[string]any{"strategy": map[string]any{
					"type":          "RollingUpdate",
					"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)},
				}},
			}}},
			"variables": []any{map[string]any{"name": "identityName", "value": identity}},
		}},
	})

	wantHost := moduleID(tenant, ccName) + ".fakecloud.test"
	var tcName string
	e.waitFor(ctx, t, 5*time.Minute, "the topology's TerraformCluster provisioned with the patched identity, the Cluster InfrastructureReady with its endpoint", func() (bool, string) {
		c, err := e.getObject(ctx, capiClusterGVR, ccName)
		if err != nil {
			return false, err.Error()
		}
		tcName, _, _ = unstructured.NestedString(c.Object, "spec", "infrastructureRef", "name")
		provisioned, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
		host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
		ready := findCondition(c, "InfrastructureReady")
		return tcName != "" && provisioned && host == wantHost && ready["status"] == "True",
			fmt.Sprintf("infrastructureRef %q, infrastructureProvisioned %v, endpoint host %q, InfrastructureReady %v, TopologyReconciled %v; TerraformCluster: %s; pods: %s",
				tcName, provisioned, host, ready, findCondition(c, "TopologyReconciled"), e.conditionsOf(ctx, tcGVR, tcName), e.podSummary(ctx, tenant))
	})
	t.Logf("the topology's TerraformCluster %s provisioned and the Cluster ready %s after the Cluster was created", tcName, time.Since(created).Round(time.Millisecond))
	tc, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, tcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tc.Spec.IdentityRef == nil || tc.Spec.IdentityRef.Name != identity {
		t.Errorf("K9: the topology's TerraformCluster has identityRef %+v, want %s from the ClusterClass patch", tc.Spec.IdentityRef, identity)
	}
	if _, owned := tc.Labels["topology.cluster.x-k8s.io/owned"]; !owned || tc.Labels[v1alpha1.LabelClusterName] != ccName {
		t.Errorf("the TerraformCluster %s labels %v: not the topology's", tc.Name, tc.Labels)
	}
	if got := tc.Annotations["cluster.x-k8s.io/cloned-from-name"]; got != ccClusterTmpl {
		t.Errorf("the TerraformCluster %s was cloned from %q, want %s", tc.Name, got, ccClusterTmpl)
	}
}

// clusterClassMachines: the topology's MachineDeployment gives ccReplicas
// provisioned Machines with distinct provider IDs (SPEC K9, K12).
func (r *mdRun) clusterClassMachines(ctx context.Context, t *testing.T) {
	e := r.env
	start := time.Now()
	var machines []unstructured.Unstructured
	e.waitFor(ctx, t, 8*time.Minute, fmt.Sprintf("%d Machines of the topology's MachineDeployment Provisioned", ccReplicas), func() (bool, string) {
		list, err := e.dyn.Resource(capiMachineGVR).Namespace(tenant).List(ctx, metav1.ListOptions{LabelSelector: "topology.cluster.x-k8s.io/deployment-name=" + ccMDTopology})
		if err != nil {
			return false, err.Error()
		}
		machines = list.Items
		ok, states := provisionedMachines(machines, ccReplicas)
		c, _ := e.getObject(ctx, capiClusterGVR, ccName)
		var topo any
		if c != nil {
			topo = findCondition(c, "TopologyReconciled")
		}
		return ok, fmt.Sprintf("Machines %v; TopologyReconciled %v; stand-ins' last error %v; objects: %s; pods: %s", states, topo, r.standInErr.Load(), e.capiSummary(ctx), e.podSummary(ctx, tenant))
	})
	t.Logf("%d Machines of the topology Provisioned %s after the cluster was", ccReplicas, time.Since(start).Round(time.Millisecond))
	pids := map[string]bool{}
	want := map[string]bool{moduleID(tenant, ccName): true}
	for _, m := range machines {
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		pids[pid] = true
		want[moduleID(tenant, m.GetName())] = true
		name, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		tm, err := e.captf.InfrastructureV1alpha1().TerraformMachines(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the TerraformMachine of Machine %s: %v", m.GetName(), err)
		}
		if tm.Spec.IdentityRef != nil {
			t.Errorf("TerraformMachine %s names identity %+v, want none (its cluster's, I2)", tm.Name, tm.Spec.IdentityRef)
		}
		if c := findConditionTyped(tm.Status.Conditions, string(v1alpha1.ConditionReady)); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("TerraformMachine %s Ready %+v, want True", tm.Name, c)
		}
	}
	if len(pids) != ccReplicas {
		t.Errorf("K9: the topology's Machines have provider IDs %v, want %d distinct", pids, ccReplicas)
	}
	if got := r.cloudIDs(ctx, t); fmt.Sprint(got) != fmt.Sprint(sortedKeys(want)) {
		t.Errorf("the fake cloud holds %v, want the topology cluster's and its machines' %v", got, sortedKeys(want))
	}
	r.scanJobLogs(ctx, t)
}

// clusterClassDelete: the topology's Cluster deleted, everything of it
// goes and the fake cloud holds nothing.
func (r *mdRun) clusterClassDelete(ctx context.Context, t *testing.T) {
	r.env.deleteClusterAndWait(ctx, t, ccName, "the topology's Cluster", capiClusterGVR, capiMDGVR, capiMSGVR, capiMachineGVR, tcGVR, tmGVR, stubCPGVR, stubConfigGVR)
	r.stopStandIn()
	if got := r.cloudIDs(ctx, t); len(got) != 0 {
		t.Errorf("the fake cloud still holds %v after the Cluster's deletion", got)
	}
}

// standIn plays the control plane and bootstrap providers the ClusterClass
// names, until ctx ends (see the comment at the top of this file).
func (r *mdRun) standIn(ctx context.Context) {
	e := r.env
	for ctx.Err() == nil {
		if cps, err := e.dyn.Resource(stubCPGVR).Namespace(tenant).List(ctx, metav1.ListOptions{}); err == nil {
			for _, cp := range cps.Items {
				version, _, _ := unstructured.NestedString(cp.Object, "spec", "version")
				have, _, _ := unstructured.NestedString(cp.Object, "status", "version")
				if version == "" || have == version {
					continue
				}
				_ = unstructured.SetNestedField(cp.Object, version, "status", "version")
				_ = unstructured.SetNestedField(cp.Object, true, "status", "initialization", "controlPlaneInitialized")
				if _, err := e.dyn.Resource(stubCPGVR).Namespace(tenant).UpdateStatus(ctx, &cp, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
					r.standInErr.Store(fmt.Sprintf("control plane %s: %v", cp.GetName(), err))
				}
			}
		}
		if cfgs, err := e.dyn.Resource(stubConfigGVR).Namespace(tenant).List(ctx, metav1.ListOptions{}); err == nil {
			for _, cfg := range cfgs.Items {
				if done, _, _ := unstructured.NestedBool(cfg.Object, "status", "initialization", "dataSecretCreated"); done || cfg.GetDeletionTimestamp() != nil {
					continue
				}
				_, err := e.kube.CoreV1().Secrets(tenant).Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: cfg.GetName(), Namespace: tenant, Labels: map[string]string{v1alpha1.LabelClusterName: ccName},
						OwnerReferences: []metav1.OwnerReference{{APIVersion: stubConfigGVR.GroupVersion().String(), Kind: "E2EConfig", Name: cfg.GetName(), UID: cfg.GetUID(), Controller: ptrTo(true)}}},
					Type: "cluster.x-k8s.io/secret",
					Data: map[string][]byte{"value": []byte(r.bootstrap), "format": []byte("cloud-config")},
				}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					r.standInErr.Store(fmt.Sprintf("bootstrap Secret %s: %v", cfg.GetName(), err))
					continue
				}
				_ = unstructured.SetNestedField(cfg.Object, cfg.GetName(), "status", "dataSecretName")
				_ = unstructured.SetNestedField(cfg.Object, true, "status", "initialization", "dataSecretCreated")
				if _, err := e.dyn.Resource(stubConfigGVR).Namespace(tenant).UpdateStatus(ctx, &cfg, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
					r.standInErr.Store(fmt.Sprintf("bootstrap config %s: %v", cfg.GetName(), err))
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func findConditionTyped(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
