package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/controllers/conflicts"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
	listers "github.com/captf/captf/pkg/generated/listers/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/metrics"
)

// Options tune the controller.
type Options struct {
	// SyncPeriod: every object is reconciled at least this often (R2).
	SyncPeriod time.Duration
	// RunnerImage is the image the Jobs' init container copies captf from (J5).
	RunnerImage string
	// RequireSourceConsent enforces SPEC C1.
	RequireSourceConsent bool
	// MaxActiveJobs caps the Jobs running at once (SPEC O4); 0 is no cap.
	MaxActiveJobs int
	// ClusterMaxActiveJobs caps the Jobs of one cluster, its machines and
	// pools, where the TerraformCluster sets no spec.maxActiveJobs; 0 is
	// no cap.
	ClusterMaxActiveJobs int
	// StateBackups is how many backups of each object's Terraform state
	// are kept, one per serial (SPEC O5); 0 takes none.
	StateBackups int
	// DriftDefaultInterval is the drift interval where neither the object
	// nor its cluster sets one; 0 is no drift checks (SPEC O7).
	DriftDefaultInterval time.Duration
	// StartWith are the other controllers that read sources through the
	// same Reader, each reporting whether it has queued its start-up
	// batch (the identity controller's Opened). The workers start once
	// all have: a source read that began before another controller's
	// batch was stamped could not serve it, and that controller would
	// read the source again (SPEC P1: one GET per identity per pass, the
	// start-up included).
	StartWith []func() bool
}

// Informers are the informers the controller reads.
type Informers struct {
	Clusters   captfinformers.TerraformClusterInformer
	Machines   captfinformers.TerraformMachineInformer
	Pools      captfinformers.TerraformMachinePoolInformer
	Identities captfinformers.TerraformClusterIdentityInformer
	Namespaces coreinformers.NamespaceInformer
	// Mirrors must be restricted to captf.io/mirrored=true (M9).
	Mirrors coreinformers.SecretInformer
	// Jobs must be restricted to captf.io/managed=true.
	Jobs batchinformers.JobInformer
	// Plans are the TerraformPlans (SPEC O8); nil runs without plans
	// (no target is gated then).
	Plans captfinformers.TerraformPlanInformer
	// CAPI are Cluster API's informers (SPEC K2-K6); nil, or nil
	// informers within, where the API server does not serve them.
	CAPI *capi.Informers
	// CAPIServed says whether Cluster API is served at all: the
	// WaitingForOwner message says so when it is not.
	CAPIServed bool
	// VariablesSources are NewVariablesSourceInformers' (SPEC O9): without
	// them a source's change is seen at the next sync period.
	VariablesSources []cache.SharedIndexInformer
}

// Controller reconciles the three workload kinds.
type Controller struct {
	// kube writes mirrors and Jobs; captf writes workload objects.
	kube  kubernetes.Interface
	captf versioned.Interface
	// uncached reads state Secrets and Jobs with a size budget (B11).
	uncached Uncached
	// kinds by kind name, each with its queue in queues.
	kinds  map[string]*kind
	queues map[string]loop.Queue
	// resolver finds identities and their users from the workload caches.
	resolver *index.Resolver
	// identities, namespaces, mirrors and jobs are the other caches.
	identities    listers.TerraformClusterIdentityLister
	namespaces    corelisters.NamespaceLister
	mirrors       corelisters.SecretLister
	mirrorIndexer cache.Indexer
	jobIndexer    cache.Indexer
	// synced reports whether every cache above has synced.
	synced []cache.InformerSynced
	// source reads source Secrets uncached, shared between reconciles (M6).
	source *source.Reader
	// conflicts records foreign Secrets in the way of a mirror (M7).
	conflicts *conflicts.Tracker
	// echoes suppresses the events of the manager's own mirror and Job writes.
	echoes *echoes
	// runSecretsGone: finished, unrecorded Jobs whose run Secret is
	// deleted (K5, inputs.go).
	runSecretsGone runSecretsGone
	// capi reads Cluster API's caches (never nil); capiServed says
	// whether the API server serves Cluster API.
	capi       *capi.Informers
	capiServed bool
	// written holds the status last written per object.
	written *loop.Written[v1alpha1.WorkloadStatus]
	// opened is set once Run has opened the queues and added every key.
	opened atomic.Bool
	// planIndexer holds the TerraformPlans by their target's UID (O8),
	// nil without a plan informer.
	planIndexer cache.Indexer
	// slots caps the running Jobs (SPEC O4, slots.go).
	slots    *slotState
	recorder record.EventRecorder
	clock    clock.WithTickerAndDelayedExecution
	opts     Options
}

// NewController builds the controller and registers its event handlers and
// indexes; call before the informer factories start.
func NewController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, uncached Uncached, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, recorder record.EventRecorder, opts Options) (*Controller, error) {
	return newController(ctx, kube, captf, uncached, inf, reader, tracker, recorder, clock.RealClock{}, opts)
}

func newController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, uncached Uncached, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, recorder record.EventRecorder, clk clock.WithTickerAndDelayedExecution, opts Options) (*Controller, error) {
	metrics.Register()
	resolver, err := index.NewControllerIndexes(inf.Clusters, inf.Machines, inf.Pools, inf.Mirrors.Informer(), inf.Jobs.Informer())
	if err != nil {
		return nil, err
	}
	for _, i := range []cache.SharedIndexInformer{inf.Machines.Informer(), inf.Pools.Informer()} {
		if err := i.AddIndexers(cache.Indexers{indexMembers: memberKeys}); err != nil {
			return nil, err
		}
	}
	for _, i := range []cache.SharedIndexInformer{inf.Clusters.Informer(), inf.Machines.Informer(), inf.Pools.Informer()} {
		if err := i.AddIndexers(cache.Indexers{indexVariablesSources: variablesSourceKeys}); err != nil {
			return nil, err
		}
	}
	capiInf := inf.CAPI
	if capiInf == nil {
		capiInf = &capi.Informers{}
	}
	var planIndexer cache.Indexer
	if inf.Plans != nil {
		if err := inf.Plans.Informer().AddIndexers(cache.Indexers{indexPlanOwner: planOwnerKeys}); err != nil {
			return nil, err
		}
		planIndexer = inf.Plans.Informer().GetIndexer()
	}
	c := &Controller{
		planIndexer: planIndexer,
		kube:        kube,
		captf:       captf,
		uncached:    uncached,
		kinds: map[string]*kind{
			v1alpha1.KindTerraformCluster:     clusterKind(inf.Clusters, captf),
			v1alpha1.KindTerraformMachine:     machineKind(inf.Machines, captf),
			v1alpha1.KindTerraformMachinePool: poolKind(inf.Pools, captf),
		},
		queues: map[string]loop.Queue{
			v1alpha1.KindTerraformCluster:     loop.NewQueue("terraformcluster", clk),
			v1alpha1.KindTerraformMachine:     loop.NewQueue("terraformmachine", clk),
			v1alpha1.KindTerraformMachinePool: loop.NewQueue("terraformmachinepool", clk),
		},
		resolver:      resolver,
		identities:    inf.Identities.Lister(),
		namespaces:    inf.Namespaces.Lister(),
		mirrors:       inf.Mirrors.Lister(),
		mirrorIndexer: inf.Mirrors.Informer().GetIndexer(),
		jobIndexer:    inf.Jobs.Informer().GetIndexer(),
		synced: []cache.InformerSynced{
			inf.Clusters.Informer().HasSynced, inf.Machines.Informer().HasSynced, inf.Pools.Informer().HasSynced,
			inf.Identities.Informer().HasSynced, inf.Namespaces.Informer().HasSynced,
			inf.Mirrors.Informer().HasSynced, inf.Jobs.Informer().HasSynced,
		},
		source:     reader,
		conflicts:  tracker,
		echoes:     newEchoes(clk),
		written:    loop.NewWritten[v1alpha1.WorkloadStatus](),
		capi:       capiInf,
		capiServed: inf.CAPIServed,
		recorder:   recorder,
		clock:      clk,
		opts:       opts,
	}
	// Until Run, events enqueue nothing (B15: a replica that does not
	// lead would keep every key for ever); Run adds every cached key.
	for _, q := range c.queues {
		q.Hold()
	}
	if inf.Plans != nil {
		c.synced = append(c.synced, inf.Plans.Informer().HasSynced)
	}
	if err := c.addHandlers(ctx, inf); err != nil {
		return nil, err
	}
	if err := c.newSlots(inf); err != nil {
		return nil, err
	}
	return c, nil
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "workload" }

// Run processes the three queues with workers each until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("workload")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting controller", "workers", workers, "syncPeriod", c.opts.SyncPeriod)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	c.openQueues()
	if !c.waitStartWith(ctx) {
		return
	}
	var wg sync.WaitGroup
	var resync []loop.Resync
	for name, k := range c.kinds {
		q := c.queues[name]
		wg.Go(func() {
			loop.Run(klog.NewContext(ctx, logger.WithValues("kind", name)), q, workers, func(ctx context.Context, key cache.ObjectName) error {
				return c.sync(ctx, k, key)
			})
		})
		resync = append(resync, loop.Resync{Queue: q, List: k.keys})
	}
	// One ticker for the three kinds: a pass is one batch (SPEC P1).
	wg.Go(func() { loop.RunResync(ctx, c.clock, c.opts.SyncPeriod, resync...) })
	wg.Go(func() { c.sweepEvery(ctx, c.opts.SyncPeriod) })
	wg.Wait()
	logger.Info("Stopped controller")
}

// openQueues lets the queues take adds, then adds every cached object as
// one batch stamped after that (SPEC P1: a source read that begins after
// the stamp serves them all, and no event dropped while held is newer than
// it), then reports the start-up done (HasSynced). An event from now on
// enqueues its keys itself; one before is in what the caches hold.
func (c *Controller) openQueues() {
	for _, q := range c.queues {
		q.Open()
	}
	at := freshness.Now()
	for name, k := range c.kinds {
		c.queues[name].AddStamped(at, k.keys()...)
	}
	c.opened.Store(true)
}

// waitStartWith waits until every controller of Options.StartWith has
// queued its start-up batch, and reports false when ctx ended first. The
// identity controller waits for this controller's batch (HasSynced), so
// both batches are stamped before either's first source read begins, and
// each source is read once at start-up (SPEC P1).
func (c *Controller) waitStartWith(ctx context.Context) bool {
	if len(c.opts.StartWith) == 0 {
		return true
	}
	err := wait.PollUntilContextCancel(ctx, startPoll, true, func(context.Context) (bool, error) {
		for _, opened := range c.opts.StartWith {
			if !opened() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// startPoll is how often waitStartWith looks.
const startPoll = 10 * time.Millisecond

// sweepEvery runs sweep once per period until ctx is done.
func (c *Controller) sweepEvery(ctx context.Context, period time.Duration) {
	ticker := c.clock.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			c.sweep()
		}
	}
}

// sweep drops what is kept about mirrors and Jobs that are gone and that
// no event will clear (SPEC B15): the echoes of writes whose object was
// deleted before the write returned. Everything else kept per object is
// forgotten by the pass that finds the object gone (sync).
func (c *Controller) sweep() {
	c.echoes.retain(func(key cache.ObjectName) bool {
		for _, idx := range []cache.Indexer{c.mirrorIndexer, c.jobIndexer} {
			if _, ok, _ := idx.GetByKey(key.String()); ok {
				return true
			}
		}
		return false
	})
}

// HasSynced reports whether Run has queued every key of the start-up.
func (c *Controller) HasSynced() bool {
	if !c.opened.Load() {
		return false
	}
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}
