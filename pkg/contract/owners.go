package contract

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// infraGroup is the API group Cluster API's references name captf's kinds by.
var infraGroup = v1alpha1.SchemeGroupVersion.Group

// Standalone reports whether obj opts out of K2-K5 with the annotation
// captf.io/standalone: "true": it runs without Cluster API objects.
func Standalone(obj metav1.Object) bool {
	return obj.GetAnnotations()[v1alpha1.AnnotationStandalone] == v1alpha1.LabelTrue
}

// Lookup is what owner resolution reads from the Cluster API caches. A
// resource the API server does not serve finds nothing.
type Lookup interface {
	Cluster(ns, name string) (*capiv1.Cluster, bool)
	Machine(ns, name string) (*capiv1.Machine, bool)
	MachinePool(ns, name string) (*capiv1.MachinePool, bool)
	// ClustersNaming returns the Clusters of ns whose
	// spec.infrastructureRef names kind/name (any API group).
	ClustersNaming(ns, kind, name string) []*capiv1.Cluster
}

// Owners is the outcome of SPEC K2 for one object.
type Owners struct {
	// Reason is ReasonDependenciesReady when the owners are resolved and
	// name the object back, else why not: WaitingForOwner, OwnerMismatch
	// or ClusterNotTerraform.
	Reason v1alpha1.ConditionReason
	// Message says what is missing or wrong, naming the objects.
	Message string
	// Cluster is the object's Cluster when it was found, even when the
	// owners do not resolve (a paused Cluster pauses what it found, K3).
	Cluster *capiv1.Cluster
	// Machine and MachinePool are the owner of a TerraformMachine or
	// TerraformMachinePool when found and it names the object back.
	Machine     *capiv1.Machine
	MachinePool *capiv1.MachinePool
	// InfrastructureCluster is the name of the TerraformCluster the
	// Cluster names (for machines and pools: their cluster, SPEC K2).
	InfrastructureCluster string
}

// Resolved reports whether the owners resolved (SPEC K2).
func (o Owners) Resolved() bool { return o.Reason == v1alpha1.ReasonDependenciesReady }

// ResolveOwners resolves the Cluster API owners of obj, an object of kind
// (SPEC K2). served says whether the API server serves Cluster API at
// all: without it nothing can own the object, and the message says so.
func ResolveOwners(kind string, obj metav1.Object, l Lookup, served bool) Owners {
	var o Owners
	switch kind {
	case v1alpha1.KindTerraformCluster:
		o = resolveCluster(obj, l)
	case v1alpha1.KindTerraformMachine:
		o = resolveMember(obj, l, capiv1.KindMachine, func(ns, name string) (memberOwner, bool) {
			m, ok := l.Machine(ns, name)
			if !ok {
				return memberOwner{}, false
			}
			return memberOwner{uid: string(m.UID), clusterName: m.Spec.ClusterName, infraRef: m.Spec.InfrastructureRef, ref: "spec.infrastructureRef", machine: m}, true
		})
	case v1alpha1.KindTerraformMachinePool:
		o = resolveMember(obj, l, capiv1.KindMachinePool, func(ns, name string) (memberOwner, bool) {
			p, ok := l.MachinePool(ns, name)
			if !ok {
				return memberOwner{}, false
			}
			return memberOwner{uid: string(p.UID), clusterName: p.Spec.ClusterName, infraRef: p.Spec.Template.Spec.InfrastructureRef, ref: "spec.template.spec.infrastructureRef", pool: p}, true
		})
	default:
		return Owners{Reason: v1alpha1.ReasonWaitingForOwner, Message: fmt.Sprintf("kind %s has no Cluster API owner", kind)}
	}
	if !o.Resolved() && !served {
		o.Message += fmt.Sprintf("; the API server does not serve Cluster API (%s): install it, or set annotation %s: \"true\" to run without it",
			capiv1.GroupVersion, v1alpha1.AnnotationStandalone)
	}
	return o
}

func resolveCluster(obj metav1.Object, l Lookup) Owners {
	ns, name := obj.GetNamespace(), obj.GetName()
	naming := slices.DeleteFunc(l.ClustersNaming(ns, v1alpha1.KindTerraformCluster, name), func(c *capiv1.Cluster) bool {
		return c.Spec.InfrastructureRef.APIGroup != infraGroup
	})
	if len(naming) > 0 {
		// Two Clusters naming one TerraformCluster is a user error Cluster
		// API does not prevent; the lowest name decides, as SPEC 1.2 does.
		c := slices.MinFunc(naming, func(a, b *capiv1.Cluster) int { return strings.Compare(a.Name, b.Name) })
		return Owners{Reason: v1alpha1.ReasonDependenciesReady, Cluster: c, InfrastructureCluster: name,
			Message: fmt.Sprintf("Cluster %s names this TerraformCluster in spec.infrastructureRef", c.Name)}
	}
	// Nobody names it: say whether an owning Cluster names something else.
	for _, ref := range ownerRefs(obj, capiv1.KindCluster) {
		c, ok := l.Cluster(ns, ref.Name)
		if !ok {
			continue
		}
		r := c.Spec.InfrastructureRef
		if r.APIGroup != infraGroup || r.Kind != v1alpha1.KindTerraformCluster {
			return Owners{Reason: v1alpha1.ReasonClusterNotTerraform, Cluster: c,
				Message: fmt.Sprintf("owner Cluster %s names %s in spec.infrastructureRef, not a TerraformCluster", c.Name, describeRef(r))}
		}
		return Owners{Reason: v1alpha1.ReasonOwnerMismatch, Cluster: c,
			Message: fmt.Sprintf("owner Cluster %s names TerraformCluster %q in spec.infrastructureRef, not this one", c.Name, r.Name)}
	}
	return Owners{Reason: v1alpha1.ReasonWaitingForOwner,
		Message: fmt.Sprintf("no Cluster in namespace %s names this TerraformCluster in spec.infrastructureRef", ns)}
}

// memberOwner is what a Machine or MachinePool says about its member.
type memberOwner struct {
	uid         string
	clusterName string
	infraRef    capiv1.ObjectReference
	ref         string // the field infraRef comes from, for messages
	machine     *capiv1.Machine
	pool        *capiv1.MachinePool
}

func resolveMember(obj metav1.Object, l Lookup, ownerKind string, get func(ns, name string) (memberOwner, bool)) Owners {
	ns, name := obj.GetNamespace(), obj.GetName()
	controller := metav1.GetControllerOfNoCopy(obj)
	if controller == nil {
		return Owners{Reason: v1alpha1.ReasonWaitingForOwner,
			Message: fmt.Sprintf("no %s is this object's controller owner yet", ownerKind)}
	}
	gv, _ := schema.ParseGroupVersion(controller.APIVersion)
	if gv.Group != capiv1.Group || controller.Kind != ownerKind {
		return Owners{Reason: v1alpha1.ReasonOwnerMismatch,
			Message: fmt.Sprintf("the controller owner is %s %s, not a %s of %s", controller.Kind, controller.Name, ownerKind, capiv1.Group)}
	}
	owner, ok := get(ns, controller.Name)
	if !ok {
		return Owners{Reason: v1alpha1.ReasonWaitingForOwner,
			Message: fmt.Sprintf("owner %s %s not found", ownerKind, controller.Name)}
	}
	if owner.uid != string(controller.UID) {
		return Owners{Reason: v1alpha1.ReasonWaitingForOwner,
			Message: fmt.Sprintf("owner %s %s has another UID than the owner reference (it was replaced)", ownerKind, controller.Name)}
	}
	if kind := memberKind(ownerKind); !owner.infraRef.Names(infraGroup, kind, name) {
		return Owners{Reason: v1alpha1.ReasonOwnerMismatch,
			Message: fmt.Sprintf("owner %s %s names %s in %s, not this object", ownerKind, controller.Name, describeRef(owner.infraRef), owner.ref)}
	}
	o := Owners{Machine: owner.machine, MachinePool: owner.pool}
	c, ok := l.Cluster(ns, owner.clusterName)
	if !ok {
		o.Reason = v1alpha1.ReasonWaitingForOwner
		o.Message = fmt.Sprintf("Cluster %q of %s %s not found", owner.clusterName, ownerKind, controller.Name)
		return o
	}
	o.Cluster = c
	r := c.Spec.InfrastructureRef
	if r.APIGroup != infraGroup || r.Kind != v1alpha1.KindTerraformCluster || r.Name == "" {
		o.Reason = v1alpha1.ReasonClusterNotTerraform
		o.Message = fmt.Sprintf("Cluster %s names %s in spec.infrastructureRef, not a TerraformCluster", c.Name, describeRef(r))
		return o
	}
	o.Reason = v1alpha1.ReasonDependenciesReady
	o.InfrastructureCluster = r.Name
	o.Message = fmt.Sprintf("%s %s of Cluster %s names this object; its cluster is TerraformCluster %s", ownerKind, controller.Name, c.Name, r.Name)
	return o
}

// memberKind is the captf kind a member owned by ownerKind must be.
func memberKind(ownerKind string) string {
	if ownerKind == capiv1.KindMachinePool {
		return v1alpha1.KindTerraformMachinePool
	}
	return v1alpha1.KindTerraformMachine
}

// ownerRefs returns obj's owner references to kind of Cluster API's group,
// by name.
func ownerRefs(obj metav1.Object, kind string) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range obj.GetOwnerReferences() {
		gv, _ := schema.ParseGroupVersion(r.APIVersion)
		if gv.Group == capiv1.Group && r.Kind == kind {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b metav1.OwnerReference) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func describeRef(r capiv1.ObjectReference) string {
	if r.Name == "" && r.Kind == "" {
		return "nothing"
	}
	group := r.APIGroup
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %q (group %s)", r.Kind, r.Name, group)
}

// Paused reports whether obj's Jobs are paused (SPEC T5, K3) and says why:
// its own cluster.x-k8s.io/paused annotation, or its Cluster's
// spec.paused. A standalone object has only the annotation.
func Paused(obj metav1.Object, o Owners) (bool, string) {
	if _, ok := obj.GetAnnotations()[v1alpha1.AnnotationPaused]; ok {
		return true, fmt.Sprintf("annotation %s is set", v1alpha1.AnnotationPaused)
	}
	if o.Cluster != nil && o.Cluster.IsPaused() && !Standalone(obj) {
		return true, fmt.Sprintf("Cluster %s has spec.paused: true", o.Cluster.Name)
	}
	return false, ""
}
