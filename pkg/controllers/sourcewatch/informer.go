package sourcewatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/metrics"
)

// newInformer returns the informer of one source: a field-selected list and
// watch whose cache holds the reduced copy only (B1).
func (c *Controller) newInformer(w *sourceWatch) cache.SharedIndexInformer {
	key := w.key
	selector := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	secrets := c.client.CoreV1().Secrets(key.Namespace)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return secrets.Watch(ctx, o)
		},
	}, c.client)
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.Secret{}, cache.SharedIndexInformerOptions{
		ObjectDescription: "source Secret " + key.String(),
	})
	_ = inf.SetTransform(reduce)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || ctx.Err() != nil {
			return // a watch ending normally; the reflector resumes or relists
		}
		metrics.SourceWatchErrors.Inc()
		klog.FromContext(ctx).Info("Watching a source Secret failed; retrying with backoff (the periods remain the bound meanwhile)",
			"secret", klog.KRef(key.Namespace, key.Name), "err", err)
	})
	c.addHandlers(inf, w)
	return inf
}

// addHandlers registers on inf, the informer of w's source, the handler
// that calls OnChange for every identity naming the source when it is
// created, updated (another fingerprint), recreated or deleted after the
// watch's baseline, and OnBaseline for each after a wanted baseline.
func (c *Controller) addHandlers(inf cache.SharedIndexInformer, w *sourceWatch) {
	key := w.key
	logger := klog.FromContext(c.ctx)
	changed := func(why string) {
		users := c.usersOf(w)
		if len(users) == 0 {
			return
		}
		metrics.SourceChanges.Inc()
		logger.V(2).Info("Source Secret changed; enqueueing its identities' users", "secret", klog.KRef(key.Namespace, key.Name), "change", why, "identities", len(users))
		for _, id := range users {
			c.handlers.OnChange(id)
		}
	}
	done := func(event string) {
		logger.V(5).Info("Source Secret event", "secret", klog.KRef(key.Namespace, key.Name), "event", event)
		if c.handled != nil {
			c.handled(key)
		}
	}
	// ours filters what the field selector should have (a fake clientset
	// ignores it).
	ours := func(obj interface{}) (*corev1.Secret, bool) {
		s, ok := loop.Unwrap(obj).(*corev1.Secret)
		return s, ok && s.Name == key.Name && s.Namespace == key.Namespace
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, initial bool) {
			if _, ok := ours(obj); !ok {
				return
			}
			defer done("add")
			if !initial {
				changed("created")
				return
			}
			if w.baseline && c.handlers.OnBaseline != nil {
				for _, id := range c.usersOf(w) {
					c.handlers.OnBaseline(id)
				}
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := ours(oldObj)
			n, ok2 := ours(newObj)
			if !ok1 || !ok2 {
				return
			}
			defer done("update")
			switch {
			case o.UID != n.UID:
				// Deleted and recreated while the watch was down.
				changed("recreated")
			case fingerprintOf(o) != fingerprintOf(n):
				changed("updated")
			}
		},
		DeleteFunc: func(obj interface{}) {
			if _, ok := ours(obj); ok {
				defer done("delete")
				changed("deleted")
			}
		},
	})
}

// reduce is the watches' transform (B1): the Secret becomes its identity
// and fingerprint; data and every other field are dropped. Idempotent: a
// reduced copy has no type, which no Secret the API server returns lacks
// (it defaults Opaque), so a tenant cannot make its Secret pass for one.
func reduce(obj interface{}) (interface{}, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok || reduced(s) {
		return obj, nil
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Annotations: map[string]string{fingerprintAnnotation: fingerprint(s)},
	}}, nil
}

func reduced(s *corev1.Secret) bool {
	_, ok := s.Annotations[fingerprintAnnotation]
	return ok && s.Type == "" && s.Data == nil && s.StringData == nil
}

// fingerprintOf returns the fingerprint of a Secret, reduced or not.
func fingerprintOf(s *corev1.Secret) string {
	if reduced(s) {
		return s.Annotations[fingerprintAnnotation]
	}
	return fingerprint(s)
}

// fingerprint hashes what decides a mirror's content (M2, M4) and the
// source's usability (C1, C2): a change to anything else is no rotation.
func fingerprint(s *corev1.Secret) string {
	h := sha256.New()
	for _, part := range []string{
		credentials.SourceHash(s.Data),
		string(s.Type),
		s.Labels[v1alpha1.LabelMirrored],
		s.Labels[v1alpha1.LabelCredential],
		s.Annotations[v1alpha1.AnnotationCredentialIdentities],
	} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
