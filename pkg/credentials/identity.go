package credentials

import (
	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// IdentitySource says where a machine's or pool's identity came from
// (SPEC I2), so that callers can explain it and index the fallback.
type IdentitySource string

const (
	// IdentitySourceNone: the object resolves to no identity (SPEC I2:
	// IdentityAllowed=False/IdentityNotFound).
	IdentitySourceNone IdentitySource = ""
	// IdentitySourceOwn: the object's own spec.identityRef.
	IdentitySourceOwn IdentitySource = "Own"
	// IdentitySourceClusterDefaults: its cluster's spec.defaults.identityRef.
	IdentitySourceClusterDefaults IdentitySource = "ClusterDefaults"
	// IdentitySourceCluster: its cluster's spec.identityRef.
	IdentitySourceCluster IdentitySource = "Cluster"
)

// ClusterIdentity returns the identity a TerraformCluster uses: its
// spec.identityRef name, or "" when unset (SPEC I1). The cluster's
// spec.defaults.identityRef is never used for the cluster itself.
func ClusterIdentity(c *v1alpha1.TerraformCluster) string {
	if c == nil {
		return ""
	}
	return refName(c.Spec.IdentityRef)
}

// MemberIdentity returns the identity a TerraformMachine or
// TerraformMachinePool uses and where it came from (SPEC I2): own, its own
// spec.identityRef; else cluster's spec.defaults.identityRef; else cluster's
// spec.identityRef. cluster is the member's cluster from [SelectCluster], nil
// when it has none (then only own counts). It returns "" and
// IdentitySourceNone when nothing applies.
//
// Because it reads the cluster's current values on every call, a machine
// without its own identityRef follows edits to its cluster (SPEC I3). A
// reference with an empty name (which admission rejects) counts as unset.
func MemberIdentity(own *v1alpha1.IdentityReference, cluster *v1alpha1.TerraformCluster) (string, IdentitySource) {
	if name := refName(own); name != "" {
		return name, IdentitySourceOwn
	}
	if cluster == nil {
		return "", IdentitySourceNone
	}
	if d := cluster.Spec.Defaults; d != nil {
		if name := refName(d.IdentityRef); name != "" {
			return name, IdentitySourceClusterDefaults
		}
	}
	if name := refName(cluster.Spec.IdentityRef); name != "" {
		return name, IdentitySourceCluster
	}
	return "", IdentitySourceNone
}

// SelectCluster returns the TerraformCluster a machine or pool in namespace
// belongs to, given the value of its cluster.x-k8s.io/cluster-name label
// (SPEC 1.2): the cluster of that namespace carrying the same label value,
// the lowest name winning if several do, or else the cluster named by the
// value. It returns nil when the value is empty or nothing matches.
//
// candidates are the clusters of the member's namespace; any from another
// namespace, and nil entries, are ignored, so a careless caller cannot cross
// a namespace boundary. The result does not depend on the candidates' order
// (ties on name, which a lister never yields, fall to the UID).
func SelectCluster(clusterName string, namespace string, candidates []*v1alpha1.TerraformCluster) *v1alpha1.TerraformCluster {
	if clusterName == "" {
		return nil
	}
	var byLabel, byName *v1alpha1.TerraformCluster
	for _, c := range candidates {
		if c == nil || c.Namespace != namespace {
			continue
		}
		if c.Labels[v1alpha1.LabelClusterName] == clusterName && before(c, byLabel) {
			byLabel = c
		}
		if c.Name == clusterName && before(c, byName) {
			byName = c
		}
	}
	if byLabel != nil {
		return byLabel
	}
	return byName
}

// before orders clusters by name, then UID; anything comes before nil.
func before(c, best *v1alpha1.TerraformCluster) bool {
	if best == nil {
		return true
	}
	if c.Name != best.Name {
		return c.Name < best.Name
	}
	return c.UID < best.UID
}

// refName returns ref's name, or "" when ref is nil.
func refName(ref *v1alpha1.IdentityReference) string {
	if ref == nil {
		return ""
	}
	return ref.Name
}
