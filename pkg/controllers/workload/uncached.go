package workload

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/bounded"
)

// Uncached are the clients of the controller's uncached reads of objects
// that tenants can write: state Secrets and Jobs (SPEC B11). No response
// of theirs is longer than MaxResponseBytes, and every LIST is paged and
// reads metadata only, so neither the size nor the number of a tenant's
// objects sets the manager's memory.
type Uncached struct {
	// Kube GETs one object by name: a state Secret, a Job.
	Kube kubernetes.Interface
	// Metadata LISTs the metadata of objects, page by page.
	Metadata metadata.Interface
}

const (
	// MaxResponseBytes is the budget of one uncached response: more than
	// any one object the API server stores (etcd's default limit is
	// 1.5 MiB, sent as protobuf), so only a page of a LIST can exceed it.
	MaxResponseBytes = 4 << 20
	// pageSize is the limit of the first page of an uncached LIST: the
	// metadata of 500 objects is typically a few hundred KiB.
	pageSize = 500
)

var (
	secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	jobsResource    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// NewUncached builds the Uncached clients from cfg: protobuf, every
// response capped at MaxResponseBytes (bounded.LimitResponses), and the
// request budget of kube (its rate limiter), whose reads these are.
func NewUncached(cfg *rest.Config, kube kubernetes.Interface) (Uncached, error) {
	c := bounded.LimitResponses(cfg, MaxResponseBytes)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if rc := kube.CoreV1().RESTClient(); rc != nil {
		c.RateLimiter = rc.GetRateLimiter()
	}
	k, err := kubernetes.NewForConfig(c)
	if err != nil {
		return Uncached{}, err
	}
	m, err := metadata.NewForConfig(c)
	if err != nil {
		return Uncached{}, err
	}
	return Uncached{Kube: k, Metadata: m}, nil
}

// listMetadata lists the metadata of resource in ns matching selector page
// by page and hands each item to keep, which copies what it needs: no page
// outlives its turn (SPEC B11). A page over MaxResponseBytes (a tenant's
// objects with large labels or annotations) is asked for again with half
// the limit, down to one object, so such objects slow the list down but
// neither stop it nor grow the heap past the budget. An error of keep
// stops the list.
func (u Uncached) listMetadata(ctx context.Context, resource schema.GroupVersionResource, ns, selector string, keep func(*metav1.PartialObjectMetadata) error) error {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: pageSize}
	for {
		list, err := u.Metadata.Resource(resource).Namespace(ns).List(ctx, opts)
		if bounded.KindOf(err) == bounded.KindInput && opts.Limit > 1 {
			opts.Limit /= 2
			continue
		}
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := keep(&list.Items[i]); err != nil {
				return err
			}
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}
