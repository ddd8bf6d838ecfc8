package workload

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
)

// SPEC section 18 in the reconcile: the controller gathers the Cluster API
// objects from its caches (and one uncached read of a bootstrap Secret),
// pkg/contract decides, and the pass writes.

// maxBootstrapBytes bounds the bootstrap data a run takes: the inputs
// reach the pod through a Secret (at most 1 MiB) as base64.
const maxBootstrapBytes = 512 << 10

// indexMembers indexes every TerraformMachine and TerraformMachinePool by
// "<namespace>/<cluster.x-k8s.io/cluster-name label>": the members of a
// cluster (K4: a cluster's destroy waits for them; a cluster's change
// reaches them).
const indexMembers = "captf.io/cluster-members"

func memberKeys(obj interface{}) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	switch obj.(type) {
	case *v1alpha1.TerraformMachine, *v1alpha1.TerraformMachinePool:
	default:
		return nil, nil
	}
	if l := m.GetLabels()[v1alpha1.LabelClusterName]; l != "" {
		return []string{m.GetNamespace() + "/" + l}, nil
	}
	return nil, nil
}

// contractState is what one pass knows of the object's Cluster API side.
type contractState struct {
	// standalone: captf.io/standalone opts the object out of K2-K5.
	standalone bool
	// owners are its resolved owners (K2); zero when standalone.
	owners contract.Owners
	// paused and pausedBy: T5's annotation or the Cluster's spec.paused (K3).
	paused   bool
	pausedBy string
	// cluster is, for a machine or pool, its TerraformCluster: the one its
	// owners name, or for a standalone member the one SPEC 1.2 selects.
	cluster *v1alpha1.TerraformCluster
	// deps is DependenciesReady (K2, K4, K5).
	deps contract.Decision
	// inputs are the contract inputs an apply would run with now (K6);
	// nil when dependencies are not ready or the object pins its inputs
	// (a provisioned machine, K5).
	inputs contract.Inputs
}

// resolveContract resolves the owners and the pause of w from the caches
// (K2, K3). It makes no request.
func (c *Controller) resolveContract(w *workload) {
	cs := &w.contract
	cs.standalone = contract.Standalone(w.obj)
	ns := w.obj.GetNamespace()
	if !cs.standalone {
		cs.owners = contract.ResolveOwners(w.kind.name, w.obj, c.capi, c.capiServed)
		if n := cs.owners.InfrastructureCluster; n != "" && w.kind.name != v1alpha1.KindTerraformCluster {
			if o, ok, err := c.resolver.ClusterIndexer.GetByKey(ns + "/" + n); err == nil && ok {
				cs.cluster, _ = o.(*v1alpha1.TerraformCluster)
			}
		}
	} else if w.kind.name != v1alpha1.KindTerraformCluster {
		// SPEC 1.2 by index (B13).
		cs.cluster, _ = c.resolver.ClusterOf(ns, w.obj.GetLabels()[v1alpha1.LabelClusterName])
	}
	cs.paused, cs.pausedBy = contract.Paused(w.obj, cs.owners)
}

// provisioned reports whether status.initialization.provisioned is true.
func provisioned(st *v1alpha1.WorkloadStatus) bool {
	return st.Initialization != nil && st.Initialization.Provisioned != nil && *st.Initialization.Provisioned
}

// dependencyStep decides DependenciesReady (K2, K4, K5) and, when the
// dependencies allow an apply, renders its inputs (K6) with the variables
// of its spec.variablesFrom (O9). A machine or pool that is not pinned
// reads its bootstrap data Secret uncached, and an object that is not
// pinned its variables sources; nothing else makes a request. An API
// error is returned for a retry.
func (c *Controller) dependencyStep(ctx context.Context, w *workload) error {
	cs := &w.contract
	now := c.clock.Now()
	var boot *contract.BootstrapData
	if cs.standalone {
		cs.deps = contract.StandaloneDecision()
	} else {
		g := contract.Gathered{Kind: w.kind.name, Owners: cs.owners}
		if cs.cluster != nil {
			g.ClusterFound = true
			g.ClusterProvisioned = provisioned(&cs.cluster.Status)
		}
		pinned := w.kind.name == v1alpha1.KindTerraformMachine && provisioned(w.status)
		if w.kind.name != v1alpha1.KindTerraformCluster && cs.owners.Resolved() && g.ClusterProvisioned && !pinned {
			var err error
			if boot, err = c.readBootstrap(ctx, w, &g); err != nil {
				return err
			}
		}
		cs.deps = contract.Dependencies(g)
	}
	// A provisioned machine pins its inputs (K5, O9): nothing is rendered
	// or read for it.
	if cs.deps.Ready && !(w.kind.name == v1alpha1.KindTerraformMachine && provisioned(w.status)) {
		vars, sensitive, problem, err := c.readVariables(ctx, w)
		if err != nil {
			return err
		}
		if problem != nil {
			cs.deps = contract.Decision{Reason: problem.Reason, Message: problem.Message}
		} else {
			src := contract.InputSources{
				Kind: w.kind.name, Object: w.obj, Owners: cs.owners, Exports: c.exportsOf(cs.cluster), Bootstrap: boot,
			}
			if tc, ok := w.robj.(*v1alpha1.TerraformCluster); ok {
				src.OwnEndpoint = contract.EndpointString(tc.Spec.ControlPlaneEndpoint.Host, tc.Spec.ControlPlaneEndpoint.Port)
			}
			cs.inputs = contract.RenderInputs(src)
			for k, v := range vars { // O9: no name is a contract input's (jobs.NameProblem)
				cs.inputs[k] = v
			}
			cs.inputs.MarkSensitive(sensitive)
		}
	}
	status := metav1.ConditionFalse
	if cs.deps.Ready {
		status = metav1.ConditionTrue
	}
	setCondition(w, now, v1alpha1.ConditionDependenciesReady, status, cs.deps.Reason, "%s", cs.deps.Message)
	if cs.deps.Reason == v1alpha1.ReasonWaitingForBootstrapData && !paused(w) {
		// K5: no event may tell that the data arrived (a bootstrap Secret
		// without the cluster-name label is not watched), so look again
		// soon, not only at the next resync.
		c.queues[w.kind.name].Wake(w.key(), bootstrapRequeue)
	}
	return nil
}

// bootstrapRequeue is how soon an object waiting for its bootstrap data
// (K5: no dataSecretName yet, its Secret missing or unusable) is looked at
// again. Machines wait for it for seconds (a bootstrap provider writes
// the Secret, then the Machine's dataSecretName), and the watch of
// bootstrap Secrets sees only those labelled with a cluster name.
const bootstrapRequeue = 10 * time.Second

// exportsOf returns a cluster's status.exports (K6: captf_cluster_outputs).
func (c *Controller) exportsOf(tc *v1alpha1.TerraformCluster) []byte {
	if tc == nil || tc.Status.Exports == nil {
		return nil
	}
	return tc.Status.Exports.Raw
}

// readBootstrap reads the bootstrap data of a machine's Machine or a
// pool's MachinePool (K5): the Secret its dataSecretName names, uncached.
// What it finds is recorded in g; the data is returned when read.
func (c *Controller) readBootstrap(ctx context.Context, w *workload, g *contract.Gathered) (*contract.BootstrapData, error) {
	var name *string
	switch {
	case w.contract.owners.Machine != nil:
		name = w.contract.owners.Machine.Spec.Bootstrap.DataSecretName
	case w.contract.owners.MachinePool != nil:
		name = w.contract.owners.MachinePool.Spec.Template.Spec.Bootstrap.DataSecretName
	}
	if name == nil || *name == "" {
		g.Bootstrap = contract.BootstrapNoSecretName
		return nil, nil
	}
	g.BootstrapSecret = *name
	s, err := c.uncached.Kube.CoreV1().Secrets(w.obj.GetNamespace()).Get(ctx, *name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		g.Bootstrap = contract.BootstrapSecretNotFound
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading bootstrap data Secret %s/%s: %w", w.obj.GetNamespace(), *name, err)
	}
	value, ok := s.Data["value"]
	switch {
	case !ok:
		g.Bootstrap, g.BootstrapProblem = contract.BootstrapInvalid, "it has no key value"
		return nil, nil
	case len(value) > maxBootstrapBytes:
		g.Bootstrap, g.BootstrapProblem = contract.BootstrapInvalid, fmt.Sprintf("its value is %d bytes, more than %d", len(value), maxBootstrapBytes)
		return nil, nil
	}
	format := string(s.Data["format"])
	if len(format) > 64 {
		g.Bootstrap, g.BootstrapProblem = contract.BootstrapInvalid, "its format is longer than 64 bytes"
		return nil, nil
	}
	g.Bootstrap = contract.BootstrapRead
	return &contract.BootstrapData{Value: value, Format: format}, nil
}

// clusterName is the Cluster API cluster a TerraformCluster belongs to:
// the Cluster that names it, else its cluster-name label, else its name.
func (c *Controller) clusterName(tc *v1alpha1.TerraformCluster, owners contract.Owners) string {
	if owners.Cluster != nil {
		return owners.Cluster.Name
	}
	if l := tc.Labels[v1alpha1.LabelClusterName]; l != "" {
		return l
	}
	return tc.Name
}

// dependents returns the machines and pools of a cluster (K4) as
// "kind/name", found by index.
func (c *Controller) dependents(w *workload) ([]string, error) {
	key := w.obj.GetNamespace() + "/" + c.clusterName(w.robj.(*v1alpha1.TerraformCluster), w.contract.owners)
	var out []string
	for _, kind := range []string{v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		objs, err := c.kinds[kind].informer.GetIndexer().ByIndex(indexMembers, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			out = append(out, kind+"/"+o.(metav1.Object).GetName())
		}
	}
	return out, nil
}

// deletionBlocked decides K4 for a deleting TerraformCluster: its destroy
// waits while machines or pools of the cluster exist. It sets
// DeletionBlocked and reports whether the destroy waits. Their deletion
// enqueues the cluster (addContractHandlers).
func (c *Controller) deletionBlocked(w *workload) (bool, error) {
	if w.kind.name != v1alpha1.KindTerraformCluster || w.contract.standalone {
		return false, nil
	}
	deps, err := c.dependents(w)
	if err != nil {
		return false, err
	}
	blocked, reason, msg := contract.DeletionBlocked(deps)
	status := metav1.ConditionFalse
	if blocked {
		status = metav1.ConditionTrue
		setCondition(w, c.clock.Now(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonDependentsExist,
			"the destroy Job waits: %s", msg)
	}
	setCondition(w, c.clock.Now(), v1alpha1.ConditionDeletionBlocked, status, reason, "%s", msg)
	return blocked, nil
}

// reportInputsApplied sets InputsApplied from status.lastApply, as the
// apply step left it, and the inputs rendered this pass (K6; upstream
// A1-171): the same facts inputsChanged decides a re-apply from, so the
// condition is False exactly while one is due or running. Ready does not
// read it.
func reportInputsApplied(w *workload, now time.Time) {
	pinned := w.kind.name == v1alpha1.KindTerraformMachine && provisioned(w.status)
	rec := w.status.LastApply
	cond := contract.InputsApplied(contract.AppliedFacts{
		LastApply: rec, GenerationApplied: coversGeneration(w, rec), Pinned: pinned, InputsHash: currentInputs(w),
	})
	setCondition(w, now, v1alpha1.ConditionInputsApplied, cond.Status, cond.Reason, "%s", cond.Message)
}
