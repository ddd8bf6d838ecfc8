package workload

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/captf/captf/pkg/bounded"
)

// metadataOf is a metadata client that answers from kube's fake API
// server through kube's reactors, so that a test's injected errors, its
// call counts and the fixture's action log see the metadata reads as they
// see the typed client's: Secrets and Jobs, the kinds the manager lists.
// It serves one page (the fakes ignore limits; TestListMetadataPagesB11
// covers paging).
func metadataOf(kube *kubefake.Clientset) *metadataFake {
	mf := &metadataFake{}
	scheme := runtime.NewScheme()
	utilruntime.Must(metav1.AddMetaToScheme(scheme))
	m := metadatafake.NewSimpleMetadataClient(scheme)
	kinds := map[schema.GroupVersionResource]schema.GroupVersionKind{
		secretsResource: corev1.SchemeGroupVersion.WithKind("Secret"),
		jobsResource:    batchv1.SchemeGroupVersion.WithKind("Job"),
	}
	m.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		gvk, ok := kinds[a.GetResource()]
		if !ok {
			return true, nil, fmt.Errorf("the metadata fake serves no %s", a.GetResource())
		}
		switch x := a.(type) {
		case k8stesting.ListAction:
			mf.listing.Store(true)
			defer mf.listing.Store(false)
			obj, err := kube.Invokes(k8stesting.NewListAction(x.GetResource(), gvk, x.GetNamespace(), metav1.ListOptions{
				LabelSelector: x.GetListRestrictions().Labels.String(), FieldSelector: x.GetListRestrictions().Fields.String()}), nil)
			if err != nil || obj == nil {
				return true, nil, err
			}
			items, err := meta.ExtractList(obj)
			if err != nil {
				return true, nil, err
			}
			out := &metav1.List{}
			for _, item := range items {
				acc, err := meta.Accessor(item)
				if err != nil {
					return true, nil, err
				}
				out.Items = append(out.Items, runtime.RawExtension{Object: meta.AsPartialObjectMetadata(acc).DeepCopy()})
			}
			return true, out, nil
		case k8stesting.GetAction:
			obj, err := kube.Invokes(k8stesting.NewGetAction(x.GetResource(), x.GetNamespace(), x.GetName()), nil)
			if err != nil || obj == nil {
				return true, nil, err
			}
			acc, err := meta.Accessor(obj)
			if err != nil {
				return true, nil, err
			}
			return true, meta.AsPartialObjectMetadata(acc).DeepCopy(), nil
		}
		return true, nil, fmt.Errorf("the metadata fake does not %s", a.GetVerb())
	})
	mf.Interface = m
	return mf
}

// metadataFake is metadataOf's client; listing is true while it lists
// through kube, so that a test can tell its LISTs from the typed client's.
type metadataFake struct {
	metadata.Interface
	listing atomic.Bool
}

// pagedServer is an API server of n objects' metadata that pages as the
// real one does (limit, continue) and answers a page of more than budget
// objects as LimitResponses would: a response over the budget.
type pagedServer struct {
	metadata.ResourceInterface // nil: only List is served
	n, budget                  int
	limits                     []int64
}

func (p *pagedServer) Resource(schema.GroupVersionResource) metadata.Getter { return p }
func (p *pagedServer) Namespace(string) metadata.ResourceInterface          { return p }

func (p *pagedServer) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	p.limits = append(p.limits, opts.Limit)
	start := 0
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	end := min(p.n, start+int(opts.Limit))
	if end-start > p.budget {
		return nil, fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w",
			&bounded.Error{Kind: bounded.KindInput, Offset: -1, Message: "over budget"})
	}
	list := &metav1.PartialObjectMetadataList{}
	for i := start; i < end; i++ {
		list.Items = append(list.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: strconv.Itoa(i)}})
	}
	if end < p.n {
		list.Continue = strconv.Itoa(end)
	}
	return list, nil
}

// B11: an uncached LIST reads page by page, and a page over the response
// budget is asked for again with half the limit, down to one object.
func TestListMetadataPagesB11(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, budget  int
		wantLimits []int64
		wantErr    bool
	}{
		{"one page", 10, 1000, []int64{pageSize}, false},
		{"pages", 1200, 1000, []int64{pageSize, pageSize, pageSize}, false},
		{"halved to fit", 300, 100, []int64{500, 250, 125, 62, 62, 62, 62, 62}, false},
		{"one by one", 3, 1, []int64{500, 250, 125, 62, 31, 15, 7, 3, 1, 1, 1}, false},
		{"no object fits", 3, 0, []int64{500, 250, 125, 62, 31, 15, 7, 3, 1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pagedServer{n: tc.n, budget: tc.budget}
			var seen []string
			err := Uncached{Metadata: p}.listMetadata(context.Background(), jobsResource, testNS, "a=b", func(m *metav1.PartialObjectMetadata) error {
				seen = append(seen, m.Name)
				return nil
			})
			require.Equal(t, tc.wantLimits, p.limits)
			if tc.wantErr {
				require.Equal(t, bounded.KindInput, bounded.KindOf(err))
				return
			}
			require.NoError(t, err)
			require.Len(t, seen, tc.n)
			for i, name := range seen {
				require.Equal(t, strconv.Itoa(i), name, "in order, each once")
			}
		})
	}
}
