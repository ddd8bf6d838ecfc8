package engine

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestX1NoSecretValueAnywhere runs last in the package: every test's source
// Secret carried secretValue. It must not appear in any event, any
// condition of any captf object, or the manager's log; nor may the hash of
// a source's data appear outside the mirrors' and Jobs' own annotations
// (SPEC X1, C5).
func TestX1NoSecretValueAnywhere(t *testing.T) {
	f := setup(t)
	forbidden := []string{secretValue, hashOf(defaultData())}

	events, err := f.e.Kube.CoreV1().Events("").List(f.ctx, metav1.ListOptions{})
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

	var statuses []any
	ids, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ids.Items {
		statuses = append(statuses, i.Status)
	}
	clusters, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusters("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters.Items {
		statuses = append(statuses, c.Status)
	}
	machines, err := f.e.Captf.InfrastructureV1alpha1().TerraformMachines("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.Items {
		statuses = append(statuses, m.Status)
	}
	b, _ := json.Marshal(statuses)
	for _, s := range forbidden {
		if strings.Contains(string(b), s) {
			t.Errorf("X1: a status or condition contains a secret value or hash")
		}
	}

	log := f.m.Log()
	if len(log) == 0 {
		t.Fatal("the manager log is empty: the scan would prove nothing")
	}
	for _, s := range forbidden {
		if strings.Contains(log, s) {
			t.Errorf("X1: the manager log contains a secret value or hash")
		}
	}
	t.Logf("scanned %d events, %d statuses and %d bytes of manager log", len(events.Items), len(statuses), len(log))
}
