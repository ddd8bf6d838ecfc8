package framework

import (
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// RequireNoSecretValues scans every event, the status of every captf
// object, and the manager's log for each forbidden string (a Secret value,
// or the hash of one): SPEC X1. Run it last in a package, after the tests
// that used those values.
func (f *Fixture) RequireNoSecretValues(forbidden ...string) {
	t := f.T
	t.Helper()
	events, err := f.Env.Kube.CoreV1().Events("").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Fatal("no events were recorded: the scan would prove nothing")
	}
	for _, ev := range events.Items {
		for _, s := range forbidden {
			if strings.Contains(ev.Message, s) || strings.Contains(ev.Reason, s) {
				t.Errorf("X1: event %s/%s (%s) contains a secret value or hash: %q", ev.Namespace, ev.Name, ev.Reason, ev.Message)
			}
		}
	}
	api := f.Env.Captf.InfrastructureV1alpha1()
	var statuses []any
	ids, err := api.TerraformClusterIdentities().List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ids.Items {
		statuses = append(statuses, i.Status)
	}
	clusters, err := api.TerraformClusters("").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters.Items {
		statuses = append(statuses, WithoutRunHashes(c.Status))
	}
	machines, err := api.TerraformMachines("").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		statuses = append(statuses, WithoutRunHashes(m.Status))
	}
	pools, err := api.TerraformMachinePools("").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools.Items {
		statuses = append(statuses, WithoutRunHashes(p.Status))
	}
	b, _ := json.Marshal(statuses)
	for _, s := range forbidden {
		if strings.Contains(string(b), s) {
			t.Errorf("X1: a status or condition contains a secret value or hash")
		}
	}
	log := f.Manager.Log()
	if len(log) == 0 {
		t.Fatal("the manager log is empty: the scan would prove nothing")
	}
	for _, s := range forbidden {
		if strings.Contains(log, s) {
			t.Errorf("X1: the manager log contains a secret value or hash")
		}
	}
	t.Logf("X1 scan: %d events, %d statuses, %d bytes of manager log", len(events.Items), len(statuses), len(log))
}

// WithoutRunHashes returns a copy of a workload status without
// lastApply.sourceHash and lastDestroy.sourceHash: SPEC T7 asks for the
// source hash there by name, copied from the Job's captf.io/source-hash
// annotation (C5), which this scan does not cover either. Every other
// field, and every condition, is scanned.
func WithoutRunHashes(st v1alpha1.WorkloadStatus) v1alpha1.WorkloadStatus {
	st = *st.DeepCopy()
	for _, r := range []*v1alpha1.RunRecord{st.LastApply, st.LastDestroy} {
		if r != nil {
			r.SourceHash = ""
		}
	}
	return st
}
