package workload

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/variables"
)

// SPEC O9 in the reconcile: the controller reads an object's
// spec.variablesFrom sources uncached (their data is never cached, B1),
// pkg/variables merges them, and the merged variables join the run's
// inputs (K6): they reach the pod only through the run Secret, and the
// inputs hash covers them, so a source's change re-applies a cluster or
// pool, while a provisioned machine keeps the inputs it was provisioned
// with. The sources' metadata is watched (labelled ones only) to enqueue
// the objects that name them.

// indexVariablesSources indexes workload objects by each variablesFrom
// source as "<namespace>/<ConfigMap|Secret>/<name>".
const indexVariablesSources = "captf.io/variables-sources"

func variablesSourceKey(ns, kind, name string) string { return ns + "/" + kind + "/" + name }

func variablesSourceKeys(obj interface{}) ([]string, error) {
	ro, ok := obj.(runtime.Object)
	m, ok2 := obj.(metav1.Object)
	if !ok || !ok2 {
		return nil, nil
	}
	var keys []string
	for _, s := range v1alpha1.VariablesFromOf(ro) {
		switch {
		case s.ConfigMapRef != nil:
			keys = append(keys, variablesSourceKey(m.GetNamespace(), "ConfigMap", s.ConfigMapRef.Name))
		case s.SecretRef != nil:
			keys = append(keys, variablesSourceKey(m.GetNamespace(), "Secret", s.SecretRef.Name))
		}
	}
	return keys, nil
}

// readVariables gathers w's variablesFrom sources, uncached, and merges
// them; the keys w's inline spec.variables sets are left out (inline wins,
// A3-24). sensitive are the keys a Secret gave (O9). A problem is for
// DependenciesReady; an error is for a retry.
func (c *Controller) readVariables(ctx context.Context, w *workload) (vars map[string]json.RawMessage, sensitive []string, _ *variables.Problem, _ error) {
	from := v1alpha1.VariablesFromOf(w.robj)
	if len(from) == 0 {
		return nil, nil, nil, nil
	}
	ns := w.obj.GetNamespace()
	sources := make([]variables.Source, 0, len(from))
	for _, f := range from {
		s := variables.Source{Optional: f.Optional, Format: f.Format}
		var meta *metav1.ObjectMeta
		var err error
		switch {
		case f.ConfigMapRef != nil:
			s.Kind, s.Name = "ConfigMap", f.ConfigMapRef.Name
			var cm *corev1.ConfigMap
			if cm, err = c.uncached.Kube.CoreV1().ConfigMaps(ns).Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
				meta = &cm.ObjectMeta
				s.Data = make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
				for k, v := range cm.Data {
					s.Data[k] = []byte(v)
				}
				for k, v := range cm.BinaryData {
					s.Data[k] = v
				}
			}
		case f.SecretRef != nil:
			s.Kind, s.Name = "Secret", f.SecretRef.Name
			var sec *corev1.Secret
			if sec, err = c.uncached.Kube.CoreV1().Secrets(ns).Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
				meta, s.Data = &sec.ObjectMeta, sec.Data
			}
		default:
			continue // the CRD requires exactly one
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, nil, fmt.Errorf("reading variables source %s %s/%s: %w", s.Kind, ns, s.Name, err)
		default:
			s.Found = true
			s.Labelled = meta.Labels[v1alpha1.LabelVariables] == v1alpha1.LabelTrue
			if !s.Labelled {
				s.Data = nil // never used
			}
		}
		sources = append(sources, s)
	}
	vars, p := variables.Merge(sources, jobs.NameProblem)
	if p != nil {
		return nil, nil, p, nil
	}
	if raw := v1alpha1.VariablesOf(w.robj); len(raw) > 0 {
		var inline map[string]json.RawMessage
		if json.Unmarshal(raw, &inline) == nil {
			for k := range inline {
				delete(vars, k)
			}
		}
	}
	for _, k := range variables.FromSecrets(sources) {
		if _, ok := vars[k]; ok {
			sensitive = append(sensitive, k)
		}
	}
	return vars, sensitive, nil, nil
}

// NewVariablesSourceInformers returns the metadata informers of the
// ConfigMaps and Secrets labelled captf.io/variables=true (SPEC O9): what
// enqueues the objects that take variables from them. They keep names and
// versions only.
func NewVariablesSourceInformers(meta metadata.Interface) []cache.SharedIndexInformer {
	var out []cache.SharedIndexInformer
	for _, r := range []string{"configmaps", "secrets"} {
		i := metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource(r), metav1.NamespaceAll, 0,
			cache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.LabelVariables + "=" + v1alpha1.LabelTrue }).Informer()
		_ = i.SetTransform(capi.TrimToName) // before the informer starts: cannot fail
		out = append(out, i)
	}
	return out
}

// addVariablesHandlers enqueues the objects that name a labelled source
// when it appears, changes or goes (O9). The source's kind is told by the
// informer: sources[0] watches ConfigMaps, sources[1] Secrets.
func (c *Controller) addVariablesHandlers(sources []cache.SharedIndexInformer) error {
	for i, inf := range sources {
		kind := "ConfigMap"
		if i == 1 {
			kind = "Secret"
		}
		enqueue := func(obj interface{}) {
			if m, ok := loop.Unwrap(obj).(metav1.Object); ok {
				c.enqueueVariablesUsers(variablesSourceKey(m.GetNamespace(), kind, m.GetName()))
			}
		}
		if err := c.handle(inf, cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue,
			UpdateFunc: func(oldObj, newObj interface{}) {
				o, ok1 := oldObj.(metav1.Object)
				n, ok2 := newObj.(metav1.Object)
				if ok1 && ok2 && o.GetResourceVersion() != n.GetResourceVersion() {
					enqueue(newObj)
				}
			},
			DeleteFunc: enqueue,
		}); err != nil {
			return err
		}
	}
	return nil
}

// enqueueVariablesUsers enqueues every workload object whose
// variablesFrom names the source key.
func (c *Controller) enqueueVariablesUsers(key string) {
	for name, k := range c.kinds {
		objs, err := k.informer.GetIndexer().ByIndex(indexVariablesSources, key)
		if err != nil {
			continue
		}
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				c.Enqueue(name, cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
			}
		}
	}
}
