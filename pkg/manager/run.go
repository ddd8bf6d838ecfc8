package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/controllers/workload"
	"github.com/captf/captf/pkg/version"
	"github.com/captf/captf/pkg/watchbound"
)

// Run runs the manager until ctx is done: it builds the clients, the
// controllers and the servers, starts the informers and the servers (in
// every replica), runs the controllers (in the leader only), and shuts down
// in the reverse order.
func Run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	d, err := newDeps(cfg, o)
	if err != nil {
		return err
	}
	if d.SourceWatchKube, err = kubernetes.NewForConfig(sourceWatchConfig(cfg, d.Kube.CoreV1().RESTClient().GetRateLimiter())); err != nil {
		return fmt.Errorf("source watch client: %w", err)
	}
	if d.Uncached, err = workload.NewUncached(cfg, d.Kube); err != nil {
		return err
	}
	if d.CAPI, d.CAPIServed, err = newCAPI(ctx, cfg, d.Kube.Discovery()); err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	d.Variables = workload.NewVariablesSourceInformers(watchbound.Metadata(meta))
	logger.Info("Starting captf manager", "version", version.Info(), "apiServer", cfg.Host,
		"syncPeriod", o.SyncPeriod, "identityResync", o.IdentityResync, "watchSources", o.WatchSources, "workers", o.Workers,
		"qps", o.QPS, "burst", o.Burst, "leaderElect", o.LeaderElect)
	recorder, stopEvents, err := newRecorder(ctx, cfg)
	if err != nil {
		return err
	}
	defer stopEvents()
	d.Recorder = recorder

	controllers, err := newControllers(ctx, d)
	if err != nil {
		return err
	}
	health := newHealth()
	webhook, err := newWebhook(d, cfg)
	if err != nil {
		return err
	}
	metricsServer, err := newMetricsServer(ctx, cfg, o)
	if err != nil {
		return err
	}

	stopInformers := startInformers(ctx, d, health)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	srv := startServers(ctx, o, health, webhook, metricsServer, cancelRun)

	if o.LeaderElect {
		err = runWithLeaderElection(runCtx, d, o, controllers)
	} else {
		runControllers(runCtx, controllers, o.Workers)
	}

	logger.Info("Controllers stopped; stopping servers")
	cancelRun()
	return errors.Join(err, srv.wait(), stopInformers())
}

// newRecorder returns the event recorder and its stop function. Events have
// their own client and budget (half the main one): a burst of MirrorCreated
// events must not slow mirror writes down. They are best effort: the
// broadcaster drops what it cannot queue.
func newRecorder(ctx context.Context, cfg *rest.Config) (record.EventRecorder, func(), error) {
	eventCfg := rest.CopyConfig(cfg)
	eventCfg.QPS, eventCfg.Burst = max(1, cfg.QPS/2), max(1, cfg.Burst/2)
	eventClient, err := kubernetes.NewForConfig(eventCfg)
	if err != nil {
		return nil, nil, err
	}
	broadcaster := newBroadcaster(ctx)
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
	return broadcaster.NewRecorder(eventScheme(), corev1.EventSource{Component: "captf-manager"}), broadcaster.Shutdown, nil
}

// startInformers starts every informer factory on a context of its own
// (the informers outlive ctx until the controllers and servers stopped),
// marks health ready once all caches synced, and returns the stop function.
func startInformers(ctx context.Context, d *Deps, health *health) (stop func() error) {
	logger := klog.FromContext(ctx)
	informersCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	factories := []interface {
		Start(<-chan struct{})
		Shutdown()
	}{d.Informers, d.JobInformers, d.MirrorInformers, d.CaptfInformers}
	for _, f := range factories {
		f.Start(informersCtx.Done())
	}
	d.CAPI.Start(informersCtx)
	for _, i := range d.Variables {
		go i.RunWithContext(informersCtx)
	}
	go func() {
		synced := waitCAPI(informersCtx, d.CAPI)
		if !synced {
			logger.Info("Informer cache did not sync", "type", "Cluster API")
		}
		if !waitInformers(informersCtx, d.Variables) {
			synced = false
			logger.Info("Informer cache did not sync", "type", "variables sources")
		}
		for _, res := range []map[string]bool{
			typeNames(d.Informers.WaitForCacheSync(informersCtx.Done())),
			typeNames(d.JobInformers.WaitForCacheSync(informersCtx.Done())),
			typeNames(d.MirrorInformers.WaitForCacheSync(informersCtx.Done())),
			typeNames(d.CaptfInformers.WaitForCacheSync(informersCtx.Done())),
		} {
			for name, ok := range res {
				if !ok {
					synced = false
					logger.Info("Informer cache did not sync", "type", name)
				}
			}
		}
		if synced {
			health.informersSynced.Store(true)
			logger.Info("Informer caches synced")
		}
	}()
	return func() error {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
		return nil
	}
}

// servers are the HTTP servers every replica runs: metrics, health probes
// and the admission webhook.
type servers struct {
	wg   sync.WaitGroup
	errs chan error
}

// startServers starts the servers on ctx. A server that fails (cannot
// bind, say) is fatal: it calls fail, which stops the controllers, and
// wait reports its error.
func startServers(ctx context.Context, o *Options, health *health, webhook *admission.Server, metrics *metricsServer, fail context.CancelFunc) *servers {
	s := &servers{errs: make(chan error, 3)}
	start := func(run func(context.Context) error) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := run(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "HTTP server failed; stopping")
				s.errs <- err
				fail()
			}
		}()
	}
	if metrics != nil {
		health.addLiveness("metrics-certificate", metrics.healthz)
		start(metrics.run)
	}
	if addr := o.HealthProbeBindAddress; addr != "" && addr != "0" {
		h := health.handler()
		start(func(ctx context.Context) error { return serveHTTP(ctx, "health", addr, h, o.ShutdownTimeout) })
	}
	if webhook != nil {
		// /healthz reports a certificate that can no longer be loaded; the
		// webhook keeps serving the last good one meanwhile.
		health.addLiveness("webhook-certificate", webhook.Healthz)
		start(func(ctx context.Context) error {
			if err := webhook.Run(ctx); err != nil {
				return fmt.Errorf("webhook server: %w", err)
			}
			return nil
		})
	}
	return s
}

// wait waits for every server to stop and returns the first failure.
func (s *servers) wait() error {
	s.wg.Wait()
	select {
	case err := <-s.errs:
		return err
	default:
		return nil
	}
}
