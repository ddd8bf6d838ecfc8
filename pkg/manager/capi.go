package manager

import (
	"context"
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/watchbound"
)

// newCAPI builds the Cluster API informers (SPEC K2-K6) for what the API
// server serves at start-up: Cluster API is optional, and objects marked
// captf.io/standalone run without it. Installing Cluster API later needs
// a restart of the manager to be seen (docs/deploy.md).
func newCAPI(ctx context.Context, cfg *rest.Config, d discovery.DiscoveryInterface) (*capi.Informers, bool, error) {
	served, err := capi.Discover(d)
	if err != nil {
		return nil, false, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, false, fmt.Errorf("Cluster API client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, false, fmt.Errorf("metadata client: %w", err)
	}
	// Their watches let go of their decoding buffers when their stream
	// ends (B12: watchbound.Release).
	inf, err := capi.NewInformers(watchbound.Dynamic(client), watchbound.Metadata(meta), served, 0)
	if err != nil {
		return nil, false, err
	}
	klog.FromContext(ctx).Info("Cluster API", "clusters", served.Clusters, "machines", served.Machines, "machinePools", served.MachinePools)
	return inf, served.Any(), nil
}

// waitCAPI waits for the Cluster API informers and reports whether they
// synced.
func waitCAPI(ctx context.Context, inf *capi.Informers) bool {
	if inf == nil {
		return true
	}
	return waitInformers(ctx, inf.All())
}

// waitInformers waits for informers and reports whether they synced.
func waitInformers(ctx context.Context, informers []cache.SharedIndexInformer) bool {
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, i := range informers {
		synced = append(synced, i.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}
