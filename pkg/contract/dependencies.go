package contract

import (
	"fmt"
	"slices"
	"strings"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Bootstrap is what the controller found of a member's bootstrap data
// (SPEC K5).
type Bootstrap int

const (
	// BootstrapNotRead: not looked at (a cluster, or a machine that pins
	// the data it was provisioned with).
	BootstrapNotRead Bootstrap = iota
	// BootstrapNoSecretName: the owner has no dataSecretName yet.
	BootstrapNoSecretName
	// BootstrapSecretNotFound: the Secret it names does not exist.
	BootstrapSecretNotFound
	// BootstrapInvalid: the Secret lacks a value, or it is too large.
	BootstrapInvalid
	// BootstrapRead: the data was read.
	BootstrapRead
)

// Gathered is what Dependencies decides from.
type Gathered struct {
	// Kind of the object.
	Kind string
	// Owners is the outcome of ResolveOwners.
	Owners Owners
	// Cluster is, for a machine or pool, whether its TerraformCluster
	// (Owners.InfrastructureCluster) is in the cache and provisioned.
	ClusterFound, ClusterProvisioned bool
	// Bootstrap says what was found of the bootstrap data, and
	// BootstrapSecret the Secret's name; BootstrapProblem why it is
	// invalid (never its content).
	Bootstrap        Bootstrap
	BootstrapSecret  string
	BootstrapProblem string
}

// Decision is the DependenciesReady condition: whether an apply may start
// (SPEC K2, K4, K5), and if not why.
type Decision struct {
	Ready   bool
	Reason  v1alpha1.ConditionReason
	Message string
}

// Dependencies decides whether the object's dependencies allow an apply:
// its owners (K2), for a machine or pool its provisioned TerraformCluster
// (K4), then its bootstrap data (K5), in that order, each named in the
// message of the first that is missing.
func Dependencies(g Gathered) Decision {
	if !g.Owners.Resolved() {
		return Decision{Reason: g.Owners.Reason, Message: g.Owners.Message}
	}
	if g.Kind == v1alpha1.KindTerraformCluster {
		return Decision{Ready: true, Reason: v1alpha1.ReasonDependenciesReady, Message: g.Owners.Message}
	}
	tc := g.Owners.InfrastructureCluster
	switch {
	case !g.ClusterFound:
		return Decision{Reason: v1alpha1.ReasonWaitingForClusterInfrastructure,
			Message: fmt.Sprintf("TerraformCluster %s not found", tc)}
	case !g.ClusterProvisioned:
		return Decision{Reason: v1alpha1.ReasonWaitingForClusterInfrastructure,
			Message: fmt.Sprintf("TerraformCluster %s is not provisioned yet (status.initialization.provisioned)", tc)}
	}
	owner := "Machine"
	field := "spec.bootstrap.dataSecretName"
	if g.Kind == v1alpha1.KindTerraformMachinePool {
		owner, field = "MachinePool", "spec.template.spec.bootstrap.dataSecretName"
	}
	switch g.Bootstrap {
	case BootstrapNoSecretName:
		return Decision{Reason: v1alpha1.ReasonWaitingForBootstrapData,
			Message: fmt.Sprintf("the %s has no %s yet", owner, field)}
	case BootstrapSecretNotFound:
		return Decision{Reason: v1alpha1.ReasonWaitingForBootstrapData,
			Message: fmt.Sprintf("bootstrap data Secret %s, named by the %s's %s, does not exist yet", g.BootstrapSecret, owner, field)}
	case BootstrapInvalid:
		return Decision{Reason: v1alpha1.ReasonWaitingForBootstrapData,
			Message: fmt.Sprintf("bootstrap data Secret %s cannot be used: %s", g.BootstrapSecret, g.BootstrapProblem)}
	}
	return Decision{Ready: true, Reason: v1alpha1.ReasonDependenciesReady,
		Message: fmt.Sprintf("%s; TerraformCluster %s is provisioned", g.Owners.Message, tc)}
}

// Standalone is the decision for an object that opts out of K2-K5.
func StandaloneDecision() Decision {
	return Decision{Ready: true, Reason: v1alpha1.ReasonDependenciesReady,
		Message: fmt.Sprintf("annotation %s: \"true\": runs without Cluster API owners", v1alpha1.AnnotationStandalone)}
}

// maxNamed bounds how many dependents a message names.
const maxNamed = 5

// DeletionBlocked decides SPEC K4 for a deleting TerraformCluster: its
// destroy waits while machines or pools of the cluster exist. dependents
// are their kind/name; blocked is false when there are none.
func DeletionBlocked(dependents []string) (blocked bool, reason v1alpha1.ConditionReason, message string) {
	if len(dependents) == 0 {
		return false, v1alpha1.ReasonNotBlocked, "no machine or pool of this cluster remains"
	}
	d := slices.Clone(dependents)
	slices.Sort(d)
	named := strings.Join(d[:min(len(d), maxNamed)], ", ")
	if len(d) > maxNamed {
		named += fmt.Sprintf(" and %d more", len(d)-maxNamed)
	}
	return true, v1alpha1.ReasonDependentsExist,
		fmt.Sprintf("the destroy waits for %d machines and pools of this cluster to be deleted: %s", len(d), named)
}
