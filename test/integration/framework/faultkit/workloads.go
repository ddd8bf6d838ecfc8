package faultkit

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
)

// The three workload kinds, by their Kind.
const (
	KindCluster = "TerraformCluster"
	KindMachine = "TerraformMachine"
	KindPool    = "TerraformMachinePool"
)

// Kinds lists the workload kinds.
var Kinds = []string{KindCluster, KindMachine, KindPool}

// Workload names one TerraformCluster, TerraformMachine or
// TerraformMachinePool.
type Workload struct {
	Kind, Namespace, Name string
	UID                   types.UID
}

func (w Workload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// State is what a workload object looks like now.
type State struct {
	Exists     bool
	Deleting   bool
	Finalizers []string
	Conditions []metav1.Condition
	UID        types.UID
	// Identity is spec.identityRef.name ("" when unset).
	Identity string
}

// CreateWorkload creates a workload object of kind whose spec.identityRef
// names identity ("" for none), with labels; it starts Jobs when image is
// set.
func CreateWorkload(ctx context.Context, c versioned.Interface, kind, ns, name, identity, image string, labels map[string]string) (Workload, error) {
	om := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
		Annotations: map[string]string{v1alpha1.AnnotationStandalone: v1alpha1.LabelTrue}}
	var ref *v1alpha1.IdentityReference
	if identity != "" {
		ref = &v1alpha1.IdentityReference{Name: identity}
	}
	api := c.InfrastructureV1alpha1()
	var uid types.UID
	var err error
	switch kind {
	case KindCluster:
		var o *v1alpha1.TerraformCluster
		o, err = api.TerraformClusters(ns).Create(ctx, &v1alpha1.TerraformCluster{ObjectMeta: om,
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref, Source: v1alpha1.SourceSpec{Image: image}}}, metav1.CreateOptions{})
		if err == nil {
			uid = o.UID
		}
	case KindMachine:
		var o *v1alpha1.TerraformMachine
		o, err = api.TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{ObjectMeta: om,
			Spec: v1alpha1.TerraformMachineSpec{IdentityRef: ref, Source: v1alpha1.SourceSpec{Image: image}}}, metav1.CreateOptions{})
		if err == nil {
			uid = o.UID
		}
	case KindPool:
		var o *v1alpha1.TerraformMachinePool
		o, err = api.TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{ObjectMeta: om,
			Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: ref, Source: v1alpha1.SourceSpec{Image: image}}}, metav1.CreateOptions{})
		if err == nil {
			uid = o.UID
		}
	default:
		err = fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return Workload{}, fmt.Errorf("creating %s %s/%s: %w", kind, ns, name, err)
	}
	return Workload{Kind: kind, Namespace: ns, Name: name, UID: uid}, nil
}

func refName(r *v1alpha1.IdentityReference) string {
	if r == nil {
		return ""
	}
	return r.Name
}

// GetWorkload reads a workload object; State.Exists is false when it is gone.
func GetWorkload(ctx context.Context, c versioned.Interface, w Workload) (State, error) {
	api := c.InfrastructureV1alpha1()
	var (
		s   State
		om  metav1.ObjectMeta
		err error
	)
	switch w.Kind {
	case KindCluster:
		var o *v1alpha1.TerraformCluster
		if o, err = api.TerraformClusters(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			om, s.Conditions, s.Identity = o.ObjectMeta, o.Status.Conditions, refName(o.Spec.IdentityRef)
		}
	case KindMachine:
		var o *v1alpha1.TerraformMachine
		if o, err = api.TerraformMachines(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			om, s.Conditions, s.Identity = o.ObjectMeta, o.Status.Conditions, refName(o.Spec.IdentityRef)
		}
	case KindPool:
		var o *v1alpha1.TerraformMachinePool
		if o, err = api.TerraformMachinePools(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			om, s.Conditions, s.Identity = o.ObjectMeta, o.Status.Conditions, refName(o.Spec.IdentityRef)
		}
	default:
		return State{}, fmt.Errorf("unknown kind %q", w.Kind)
	}
	if apierrors.IsNotFound(err) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	s.Exists, s.Deleting, s.Finalizers, s.UID = true, om.DeletionTimestamp != nil, om.Finalizers, om.UID
	return s, nil
}

// ListWorkloads lists the workload objects of every kind in namespace (""
// for all) matching the label selector, by UID.
func ListWorkloads(ctx context.Context, c versioned.Interface, namespace, selector string) (map[types.UID]State, error) {
	api := c.InfrastructureV1alpha1()
	lo := metav1.ListOptions{LabelSelector: selector}
	out := map[types.UID]State{}
	add := func(om metav1.ObjectMeta, conds []metav1.Condition, ref *v1alpha1.IdentityReference) {
		out[om.UID] = State{Exists: true, Deleting: om.DeletionTimestamp != nil, Finalizers: om.Finalizers, Conditions: conds, UID: om.UID, Identity: refName(ref)}
	}
	clusters, err := api.TerraformClusters(namespace).List(ctx, lo)
	if err != nil {
		return nil, err
	}
	for _, o := range clusters.Items {
		add(o.ObjectMeta, o.Status.Conditions, o.Spec.IdentityRef)
	}
	machines, err := api.TerraformMachines(namespace).List(ctx, lo)
	if err != nil {
		return nil, err
	}
	for _, o := range machines.Items {
		add(o.ObjectMeta, o.Status.Conditions, o.Spec.IdentityRef)
	}
	pools, err := api.TerraformMachinePools(namespace).List(ctx, lo)
	if err != nil {
		return nil, err
	}
	for _, o := range pools.Items {
		add(o.ObjectMeta, o.Status.Conditions, o.Spec.IdentityRef)
	}
	return out, nil
}

// DeleteWorkload deletes a workload object (gone already is fine).
func DeleteWorkload(ctx context.Context, c versioned.Interface, w Workload) error {
	api := c.InfrastructureV1alpha1()
	var err error
	switch w.Kind {
	case KindCluster:
		err = api.TerraformClusters(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{})
	case KindMachine:
		err = api.TerraformMachines(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{})
	case KindPool:
		err = api.TerraformMachinePools(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{})
	default:
		err = fmt.Errorf("unknown kind %q", w.Kind)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// AnnotateWorkload sets an annotation on a workload object, retrying
// conflicts.
func AnnotateWorkload(ctx context.Context, c versioned.Interface, w Workload, key, value string) error {
	api := c.InfrastructureV1alpha1()
	set := func(om *metav1.ObjectMeta) {
		if om.Annotations == nil {
			om.Annotations = map[string]string{}
		}
		om.Annotations[key] = value
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		switch w.Kind {
		case KindCluster:
			o, err := api.TerraformClusters(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			set(&o.ObjectMeta)
			_, err = api.TerraformClusters(w.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			return err
		case KindMachine:
			o, err := api.TerraformMachines(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			set(&o.ObjectMeta)
			_, err = api.TerraformMachines(w.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			return err
		case KindPool:
			o, err := api.TerraformMachinePools(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			set(&o.ObjectMeta)
			_, err = api.TerraformMachinePools(w.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			return err
		}
		return fmt.Errorf("unknown kind %q", w.Kind)
	})
}
