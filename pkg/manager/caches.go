package manager

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/trim"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
	"github.com/captf/captf/pkg/watchbound"
)

// withCaches sets d's informer factories, built on d's clients. They are
// split by label selector: the manager never caches Secrets or Jobs it did
// not label (SPEC M9). A tenant can put those labels on its own Secrets and
// Jobs, and any label or annotation on its own objects, so every informer
// has trim.ForCache as its transform: a cache keeps only what the manager
// reads (SPEC B1, B12; the keep-lists are in pkg/controllers/trim), and its
// size does not follow what tenants store.
func withCaches(d *Deps) *Deps {
	selector := func(label string) kubeinformers.SharedInformerOption {
		return kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = label + "=" + v1alpha1.LabelTrue
		})
	}
	transform := kubeinformers.WithTransform(trim.ForCache)
	// The informers' watches let go of their decoding buffers when their
	// stream ends (B12: watchbound.Release says why).
	kube, captf := watchbound.Kube(d.Kube), watchbound.Captf(d.Captf)
	d.Informers = kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, transform)
	d.JobInformers = kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, selector(v1alpha1.LabelManaged), transform)
	d.MirrorInformers = kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, selector(v1alpha1.LabelMirrored), transform)
	d.CaptfInformers = captfinformers.NewSharedInformerFactoryWithOptions(captf, 0, captfinformers.WithTransform(trim.ForCache))
	return d
}
