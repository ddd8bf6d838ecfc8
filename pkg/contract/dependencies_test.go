package contract

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// SPEC K2, K4, K5: the first missing dependency is the reason.
func TestDependencies(t *testing.T) {
	resolved := Owners{Reason: v1alpha1.ReasonDependenciesReady, InfrastructureCluster: "tc1", Message: "owned"}
	const tc, tm, tmp = v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool
	for _, tt := range []struct {
		name   string
		g      Gathered
		ready  bool
		reason v1alpha1.ConditionReason
		msg    string
	}{
		{"owners first", Gathered{Kind: tm, Owners: Owners{Reason: v1alpha1.ReasonOwnerMismatch, Message: "m"}}, false, v1alpha1.ReasonOwnerMismatch, "m"},
		{"cluster needs only its owner", Gathered{Kind: tc, Owners: resolved}, true, v1alpha1.ReasonDependenciesReady, "owned"},
		{"machine: cluster missing", Gathered{Kind: tm, Owners: resolved, Bootstrap: BootstrapRead}, false, v1alpha1.ReasonWaitingForClusterInfrastructure, "TerraformCluster tc1 not found"},
		{"machine: cluster not provisioned", Gathered{Kind: tm, Owners: resolved, ClusterFound: true, Bootstrap: BootstrapRead}, false, v1alpha1.ReasonWaitingForClusterInfrastructure, "not provisioned"},
		{"machine: no dataSecretName", Gathered{Kind: tm, Owners: resolved, ClusterFound: true, ClusterProvisioned: true, Bootstrap: BootstrapNoSecretName}, false, v1alpha1.ReasonWaitingForBootstrapData, "spec.bootstrap.dataSecretName"},
		{"pool: no dataSecretName", Gathered{Kind: tmp, Owners: resolved, ClusterFound: true, ClusterProvisioned: true, Bootstrap: BootstrapNoSecretName}, false, v1alpha1.ReasonWaitingForBootstrapData, "spec.template.spec.bootstrap.dataSecretName"},
		{"machine: Secret missing", Gathered{Kind: tm, Owners: resolved, ClusterFound: true, ClusterProvisioned: true, Bootstrap: BootstrapSecretNotFound, BootstrapSecret: "bs"}, false, v1alpha1.ReasonWaitingForBootstrapData, "bootstrap data Secret bs, named by the Machine's spec.bootstrap.dataSecretName, does not exist yet"},
		{"machine: Secret invalid", Gathered{Kind: tm, Owners: resolved, ClusterFound: true, ClusterProvisioned: true, Bootstrap: BootstrapInvalid, BootstrapSecret: "bs", BootstrapProblem: "no key value"}, false, v1alpha1.ReasonWaitingForBootstrapData, "bs cannot be used: no key value"},
		{"machine: all there", Gathered{Kind: tm, Owners: resolved, ClusterFound: true, ClusterProvisioned: true, Bootstrap: BootstrapRead}, true, v1alpha1.ReasonDependenciesReady, "TerraformCluster tc1 is provisioned"},
		{"provisioned machine pins its data", Gathered{Kind: tm, Owners: resolved, ClusterFound: true, ClusterProvisioned: true, Bootstrap: BootstrapNotRead}, true, v1alpha1.ReasonDependenciesReady, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Dependencies(tt.g)
			assert.Equal(t, tt.ready, d.Ready)
			assert.Equal(t, tt.reason, d.Reason)
			assert.Contains(t, d.Message, tt.msg)
		})
	}
	s := StandaloneDecision()
	assert.True(t, s.Ready)
	assert.Equal(t, v1alpha1.ReasonDependenciesReady, s.Reason)
}

func TestDeletionBlocked(t *testing.T) {
	blocked, reason, msg := DeletionBlocked(nil)
	assert.False(t, blocked)
	assert.Equal(t, v1alpha1.ReasonNotBlocked, reason)
	assert.NotEmpty(t, msg)

	blocked, reason, msg = DeletionBlocked([]string{"TerraformMachine/b", "TerraformMachinePool/a"})
	assert.True(t, blocked)
	assert.Equal(t, v1alpha1.ReasonDependentsExist, reason)
	assert.Contains(t, msg, "2 machines and pools")
	assert.Contains(t, msg, "TerraformMachine/b, TerraformMachinePool/a")

	var many []string
	for i := range 8 {
		many = append(many, fmt.Sprintf("TerraformMachine/m%d", i))
	}
	_, _, msg = DeletionBlocked(many)
	assert.Contains(t, msg, "and 3 more")
	assert.NotContains(t, msg, "m7")
}
