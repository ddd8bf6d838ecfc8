package faultkit

import (
	"crypto/rand"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// LabelledSecret is the i-th Secret of a flood of size random bytes that
// carries the label the manager's Secret informer selects on,
// captf.io/mirrored=true, and every fourth also captf.io/managed=true: any
// tenant can put them on its own Secrets (SPEC B1: the manager's memory
// must not grow with their size).
func LabelledSecret(namespace, name string, size, i int) *corev1.Secret {
	payload := make([]byte, size)
	_, _ = rand.Read(payload)
	labels := map[string]string{v1alpha1.LabelMirrored: v1alpha1.LabelTrue}
	if i%4 == 0 {
		labels[v1alpha1.LabelManaged] = v1alpha1.LabelTrue
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Data: map[string][]byte{"payload": payload}}
}
