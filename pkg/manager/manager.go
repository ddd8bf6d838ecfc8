package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go request, workqueue and leader election metrics
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/admission"
	identitywebhook "github.com/captf/captf/pkg/admission/identity"
	planwebhook "github.com/captf/captf/pkg/admission/plan"
	templatewebhook "github.com/captf/captf/pkg/admission/template"
	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/controllers/conflicts"
	"github.com/captf/captf/pkg/controllers/identity"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/controllers/sourcewatch"
	"github.com/captf/captf/pkg/controllers/workload"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	captfscheme "github.com/captf/captf/pkg/generated/clientset/versioned/scheme"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/version"
	"github.com/captf/captf/pkg/watchbound"
)

// Controller is one control loop. Run blocks until ctx is done and its
// workers have returned; it is called only in the replica that leads.
type Controller interface {
	Name() string
	Run(ctx context.Context, workers int)
}

// Deps are what controllers and webhook validators are built from. The
// informer factories are split by label selector: the manager never caches
// Secrets or Jobs it did not label (SPEC M9).
type Deps struct {
	Options *Options
	Kube    kubernetes.Interface
	Captf   versioned.Interface
	// Informers watches cluster-wide kinds without a selector: Namespaces.
	Informers kubeinformers.SharedInformerFactory
	// JobInformers watches only Jobs labelled captf.io/managed=true.
	JobInformers kubeinformers.SharedInformerFactory
	// MirrorInformers watches only Secrets labelled captf.io/mirrored=true (M9).
	MirrorInformers kubeinformers.SharedInformerFactory
	// CaptfInformers watches the four captf kinds.
	CaptfInformers captfinformers.SharedInformerFactory
	// Recorder emits events as captf-manager.
	Recorder record.EventRecorder
	// CAPI are Cluster API's informers (SPEC K2-K6), for the resources
	// the API server serves; CAPIServed says whether it serves any.
	CAPI       *capi.Informers
	CAPIServed bool
	// Variables watch the metadata of the ConfigMaps and Secrets labelled
	// captf.io/variables=true (SPEC O9).
	Variables []cache.SharedIndexInformer
	// Uncached are the workload controller's clients of uncached reads of
	// state Secrets and Jobs, within a size budget (SPEC B11).
	Uncached workload.Uncached
	// SourceWatchKube is the source watches' client (P2): Kube's
	// configuration and rate limiter, without response compression
	// ([sourceWatchConfig]); nil means Kube.
	SourceWatchKube kubernetes.Interface
}

// newControllers builds the controllers. Each requests its informers here,
// before the factories start.
func newControllers(ctx context.Context, d *Deps) ([]Controller, error) {
	captf := d.CaptfInformers.Infrastructure().V1alpha1()
	// Source Secrets are read uncached on every pass (I4) under the uncached
	// reads' size budget (B11).
	reader := source.NewReader(d.sourceKube())
	// The identity controller is built after the workload controller (it
	// waits for its batch); the workload's workers wait for the identity's
	// batch in turn (P1), read once Run starts.
	var identities *identity.Controller
	// Conflicts are re-recorded every sync period while they last (R2).
	tracker := conflicts.New(clock.RealClock{}, 2*d.Options.SyncPeriod+time.Minute)
	workloads, err := workload.NewController(ctx, d.Kube, d.Captf, d.Uncached, workload.Informers{
		Clusters:         captf.TerraformClusters(),
		Machines:         captf.TerraformMachines(),
		Pools:            captf.TerraformMachinePools(),
		Identities:       captf.TerraformClusterIdentities(),
		Namespaces:       d.Informers.Core().V1().Namespaces(),
		Mirrors:          d.MirrorInformers.Core().V1().Secrets(),
		Jobs:             d.JobInformers.Batch().V1().Jobs(),
		Plans:            captf.TerraformPlans(),
		CAPI:             d.CAPI,
		CAPIServed:       d.CAPIServed,
		VariablesSources: d.Variables,
	}, reader, tracker, d.Recorder, workload.Options{
		SyncPeriod:           d.Options.SyncPeriod,
		RunnerImage:          d.Options.RunnerImage,
		RequireSourceConsent: d.Options.RequireSourceConsent,
		MaxActiveJobs:        d.Options.MaxActiveJobs,
		ClusterMaxActiveJobs: d.Options.ClusterMaxActiveJobs,
		StateBackups:         d.Options.StateBackups,
		DriftDefaultInterval: d.Options.DriftDefaultInterval,
		StartWith:            []func() bool{func() bool { return identities.Opened() }},
	})
	if err != nil {
		return nil, err
	}
	identities, err = identity.NewController(ctx, d.Kube, d.Captf, identity.Informers{
		Identities: captf.TerraformClusterIdentities(),
		Clusters:   captf.TerraformClusters(),
		Machines:   captf.TerraformMachines(),
		Pools:      captf.TerraformMachinePools(),
		Namespaces: d.Informers.Core().V1().Namespaces(),
		Mirrors:    d.MirrorInformers.Core().V1().Secrets(),
		Jobs:       d.JobInformers.Batch().V1().Jobs(),
	}, reader, tracker, workloads.EnqueueOwnersStamped, d.Recorder, identity.Options{
		Resync:               d.Options.IdentityResync,
		RequireSourceConsent: d.Options.RequireSourceConsent,
		WaitFor:              []cache.InformerSynced{workloads.HasSynced},
	})
	if err != nil {
		return nil, err
	}
	tracker.OnChange = identities.Enqueue
	controllers := []Controller{workloads, identities}
	if d.Options.WatchSources {
		sources, err := newSourceWatch(d, workloads, identities)
		if err != nil {
			return nil, err
		}
		controllers = append(controllers, sources)
	}
	return controllers, nil
}

// newSourceWatch builds the source Secret watches (SPEC P2): a change
// enqueues the identity's users as one batch (found from the workload
// informers' indexes, as I4 does; one source read serves them all, P1) and
// the identity (S2, S4, section 13 status).
func newSourceWatch(d *Deps, workloads *workload.Controller, identities *identity.Controller) (Controller, error) {
	captf := d.CaptfInformers.Infrastructure().V1alpha1()
	kube := d.SourceWatchKube
	if kube == nil {
		kube = d.Kube
	}
	return sourcewatch.New(watchbound.Kube(kube), captf.TerraformClusterIdentities(), sourcewatch.Handlers{
		OnChange: func(id string) {
			workloads.EnqueueUsers(id)
			identities.Enqueue(id)
		},
		OnBaseline: identities.Enqueue,
	})
}

// newWebhook builds the admission webhook server (every replica, SPEC
// section 8), or nil when --webhook-port is 0. Its validator reads the
// workload informers' indexes (A4), so it is built before they start; its
// SubjectAccessReviews go through a client of its own (B14), so whoever
// reaches its port spends that client's budget, never the controllers'.
func newWebhook(d *Deps, cfg *rest.Config) (*admission.Server, error) {
	o := d.Options
	if o.WebhookPort == 0 {
		return nil, nil
	}
	reviews, err := kubernetes.NewForConfig(webhookConfig(cfg, o))
	if err != nil {
		return nil, err
	}
	captf := d.CaptfInformers.Infrastructure().V1alpha1()
	clusters, machines, pools := captf.TerraformClusters(), captf.TerraformMachines(), captf.TerraformMachinePools()
	resolver, err := index.NewResolver(clusters, machines, pools)
	if err != nil {
		return nil, err
	}
	mirrors := d.MirrorInformers.Core().V1().Secrets().Informer()
	if err := index.AddMirrorIndexers(mirrors); err != nil {
		return nil, err
	}
	// Until the caches have synced, an empty answer would be a lie: A4
	// refuses (A5) rather than allow deleting an identity in use.
	synced := func() error {
		for _, inf := range []cache.SharedIndexInformer{clusters.Informer(), machines.Informer(), pools.Informer(), mirrors} {
			if !inf.HasSynced() {
				return errors.New("the manager's informer caches have not synced yet; retry shortly")
			}
		}
		return nil
	}
	v := &identitywebhook.Validator{
		SAR: reviews.AuthorizationV1().SubjectAccessReviews(),
		// Lookups read the informers' indexes: no API request (B13).
		Users: func(identity string) ([]index.Ref, error) {
			if err := synced(); err != nil {
				return nil, err
			}
			return resolver.Users(identity)
		},
		Mirrors: func(identity string) ([]string, error) {
			if err := synced(); err != nil {
				return nil, err
			}
			return index.MirrorNamespaces(mirrors.GetIndexer(), identity)
		},
	}
	srv, err := admission.NewServer(admission.Options{
		Addr:    net.JoinHostPort(o.WebhookHost, strconv.Itoa(o.WebhookPort)),
		CertDir: o.WebhookCertDir,
		// SPEC B5.
		MaxInFlight: o.WebhookMaxInFlight,
		// SPEC B14.
		ClientCAFile: o.WebhookClientCA,
	}, append([]admission.Route{v.Route(), newPlanWebhook(reviews).Route()}, templatewebhook.Validator{}.Routes()...)...)
	if err != nil {
		return nil, fmt.Errorf("webhook server (--webhook-port=%d, --webhook-cert-dir=%s, --webhook-client-ca=%s): %w",
			o.WebhookPort, o.WebhookCertDir, o.WebhookClientCA, err)
	}
	return srv, nil
}

// newPlanWebhook builds the TerraformPlan route (SPEC O8): approval is
// reviewed with the webhook's client (B14), and the manager's own username
// is learnt from that client's credentials, which are the manager's.
func newPlanWebhook(kube kubernetes.Interface) *planwebhook.Validator {
	return &planwebhook.Validator{
		SAR:     kube.AuthorizationV1().SubjectAccessReviews(),
		Manager: planwebhook.SelfUser(kube.AuthenticationV1().SelfSubjectReviews()),
	}
}

// WebhookUserAgent is the user agent of the webhook's own API client,
// told apart from the controllers' in the API server's audit log (B14).
func WebhookUserAgent() string { return version.UserAgent() + " admission" }

// webhookConfig is the webhook's own copy of cfg: its own rate limiter
// (--webhook-kube-api-qps and -burst) and user agent (SPEC B14).
func webhookConfig(cfg *rest.Config, o *Options) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = float32(o.WebhookQPS), o.WebhookBurst
	c.RateLimiter = nil
	c.UserAgent = WebhookUserAgent()
	return c
}

// runControllers runs every controller until ctx is done and all returned.
func runControllers(ctx context.Context, controllers []Controller, workers int) {
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(ctx, workers)
		}()
	}
	<-ctx.Done()
	wg.Wait()
}

// restConfig loads the kubeconfig or the in-cluster configuration and
// applies the client limits and user agent.
func restConfig(o *Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			err = fmt.Errorf("loading --kubeconfig %s: %w", o.Kubeconfig, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			err = fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	metrics.Register()
	cfg.Wrap(metrics.CountRequests)
	// A watch that carried a tenant's large object is ended soon after, so
	// client-go's decoding buffers do not stay that size (B12).
	cfg.Wrap(watchbound.Wrap)
	cfg.QPS = float32(o.QPS)
	cfg.Burst = o.Burst
	cfg.UserAgent = version.UserAgent()
	return cfg, nil
}

// sourceWatchConfig is the source watches' copy of cfg (issue 25): one
// watch per source Secret stays open for the manager's life, and a
// gzip-compressed stream holds a decompressor of about 45 KB while it is
// open (100 identities held about 5 MB, whatever the objects), to carry
// one small Secret; without compression it holds nothing. The copy
// shares the core client's rate limiter, so the watches spend the same
// budget as before (--kube-api-qps is per client).
func sourceWatchConfig(cfg *rest.Config, limiter flowcontrol.RateLimiter) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.DisableCompression = true
	c.RateLimiter = limiter
	return c
}

// newDeps builds the clients and the informer factories.
func newDeps(cfg *rest.Config, o *Options) (*Deps, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	captf, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return withCaches(&Deps{Options: o, Kube: kube, Captf: captf}), nil
}

// eventScheme knows the core and captf kinds, so events can reference both.
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = scheme.AddToScheme(s)
	_ = captfscheme.AddToScheme(s)
	return s
}

// serveHTTP serves h on addr until ctx is done, then shuts down gracefully.
func serveHTTP(ctx context.Context, name, addr string, h http.Handler, shutdownTimeout time.Duration) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s server: %w", name, err)
	}
	return serve(ctx, name, l, h, shutdownTimeout)
}

// serve serves h on l until ctx is done, then shuts down gracefully.
func serve(ctx context.Context, name string, l net.Listener, h http.Handler, shutdownTimeout time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	klog.FromContext(ctx).Info("Serving", "server", name, "address", l.Addr().String())
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(l) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("%s server: %w", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// sourceKube is the client of the source Secrets' reads: the uncached
// clients' (protobuf, each response within workload.MaxResponseBytes, B11),
// or Kube where a test built Deps without them.
func (d *Deps) sourceKube() kubernetes.Interface {
	if d.Uncached.Kube != nil {
		return d.Uncached.Kube
	}
	return d.Kube
}
