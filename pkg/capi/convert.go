package capi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
)

// The labels and annotations of Cluster API objects the manager acts on;
// the transform drops every other one (SPEC B12).
var (
	keptLabels = map[string]bool{
		capiv1.LabelClusterName:  true, // SPEC 1.2, K2: which cluster
		capiv1.LabelControlPlane: true, // SPEC K6: the input control_plane
	}
	keptAnnotations = map[string]bool{
		capiv1.AnnotationPaused: true, // SPEC K3
	}
)

// Bounds on a MachinePool template's labels, which become the input
// node_labels (SPEC K6): beyond them the labels are dropped and
// NodeLabelsDropped is set, so a tenant's megabyte of labels is not
// cached (SPEC B12) and the pool reports why it has no node_labels.
const (
	maxNodeLabels      = 256
	maxNodeLabelsBytes = 64 << 10
)

// toCluster is the Clusters' informer transform.
func toCluster(obj interface{}) (interface{}, error) {
	return convert(obj, func() runtime.Object { return &capiv1.Cluster{} }, nil)
}

// toMachine is the Machines' informer transform.
func toMachine(obj interface{}) (interface{}, error) {
	return convert(obj, func() runtime.Object { return &capiv1.Machine{} }, nil)
}

// toMachinePool is the MachinePools' informer transform.
func toMachinePool(obj interface{}) (interface{}, error) {
	return convert(obj, func() runtime.Object { return &capiv1.MachinePool{} }, func(o runtime.Object) {
		mp := o.(*capiv1.MachinePool)
		mp.Spec.Template.ObjectMeta.Annotations = nil
		mp.Spec.Template.NodeLabelsDropped = !boundedLabels(mp.Spec.Template.ObjectMeta.Labels)
		if mp.Spec.Template.NodeLabelsDropped {
			mp.Spec.Template.ObjectMeta.Labels = nil
		}
	})
}

// convert turns an unstructured object from the API server (or a
// tombstone holding one) into the typed subset with trimmed metadata. An
// object already converted is returned as is, so the transform may run
// twice (a re-list).
func convert(obj interface{}, newObj func() runtime.Object, finish func(runtime.Object)) (interface{}, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		inner, err := convert(o.Obj, newObj, finish)
		if err != nil {
			return nil, err
		}
		return cache.DeletedFinalStateUnknown{Key: o.Key, Obj: inner}, nil
	case *unstructured.Unstructured:
		out := newObj()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.UnstructuredContent(), out); err != nil {
			// A field of an unexpected type: keep the object's identity
			// so lookups see it exists, without its spec.
			out = newObj()
			m, _ := out.(metav1.Object)
			m.SetNamespace(o.GetNamespace())
			m.SetName(o.GetName())
			m.SetUID(o.GetUID())
			m.SetResourceVersion(o.GetResourceVersion())
			m.SetGeneration(o.GetGeneration())
			m.SetLabels(o.GetLabels())
			m.SetAnnotations(o.GetAnnotations())
			m.SetDeletionTimestamp(o.GetDeletionTimestamp())
		}
		trimMeta(out.(metav1.Object))
		if finish != nil {
			finish(out)
		}
		return out, nil
	case *capiv1.Cluster, *capiv1.Machine, *capiv1.MachinePool:
		return obj, nil
	}
	return nil, fmt.Errorf("%w: %T", errNotUnstructured, obj)
}

// trimMeta keeps of the metadata what lookups, owner checks and the kept
// labels and annotations need.
func trimMeta(m metav1.Object) {
	m.SetManagedFields(nil)
	m.SetLabels(keep(m.GetLabels(), keptLabels))
	m.SetAnnotations(keep(m.GetAnnotations(), keptAnnotations))
	m.SetFinalizers(nil)
	m.SetOwnerReferences(nil)
}

func keep(in map[string]string, kept map[string]bool) map[string]string {
	var out map[string]string
	for k, v := range in {
		if kept[k] {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func boundedLabels(l map[string]string) bool {
	if len(l) > maxNodeLabels {
		return false
	}
	n := 0
	for k, v := range l {
		n += len(k) + len(v)
	}
	return n <= maxNodeLabelsBytes
}

// TrimToName is the transform of the metadata-only watches of objects
// whose data the manager reads uncached (bootstrap data Secrets, K5;
// variables sources, O9): their namespace, name, UID and resourceVersion
// are all it keeps (a new version is a change of the data to read).
func TrimToName(obj interface{}) (interface{}, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		inner, err := TrimToName(o.Obj)
		if err != nil {
			return nil, err
		}
		return cache.DeletedFinalStateUnknown{Key: o.Key, Obj: inner}, nil
	case *metav1.PartialObjectMetadata:
		if len(o.Labels) == 0 && len(o.Annotations) == 0 && o.ManagedFields == nil && o.OwnerReferences == nil && o.Finalizers == nil {
			return o, nil
		}
		return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
		}}, nil
	}
	return nil, fmt.Errorf("capi: not an object's metadata: %T", obj)
}
