package jobs

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TrimForCache is the transform of the manager's Job informer (SPEC B1): it
// keeps the metadata (labels, annotations such as captf.io/source-hash,
// owner references) and the status the manager reads, and drops the pod
// template and managed fields, so a tenant's large labelled Jobs cost the
// cache almost nothing. Objects of other types are returned unchanged.
func TrimForCache(obj interface{}) (interface{}, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	j.ManagedFields = nil
	j.Spec.Template = corev1.PodTemplateSpec{}
	return j, nil
}
