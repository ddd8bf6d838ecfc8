package index

import (
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/credentials"
)

// JobsOf returns the Jobs whose controller is the object with uid: one
// bucket of the Controller index, whatever other owner references tenants
// put on their Jobs (B13).
func JobsOf(jobs cache.Indexer, uid types.UID) ([]*batchv1.Job, error) {
	objs, err := jobs.ByIndex(Controller, string(uid))
	if err != nil {
		return nil, err
	}
	out := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		j := o.(*batchv1.Job)
		if c := metav1.GetControllerOfNoCopy(j); c != nil && c.UID == uid {
			out = append(out, j)
		}
	}
	return out, nil
}

// MirrorNamespaces returns the namespaces holding a mirror of identity that
// is not being deleted, sorted (what status.namespaces converges to, S2).
func MirrorNamespaces(mirrors cache.Indexer, identity string) ([]string, error) {
	objs, err := mirrors.ByIndex(MirrorIdentity, identity)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		s := o.(*corev1.Secret)
		if s.DeletionTimestamp == nil && s.Name == credentials.MirrorName(identity) {
			out = append(out, s.Namespace)
		}
	}
	sort.Strings(out)
	return out, nil
}
