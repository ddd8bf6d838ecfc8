package manager

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// runWithLeaderElection runs the controllers while this replica holds the
// Lease. The Lease is released only after the controllers have stopped, so a
// graceful stop hands over at once without two leaders overlapping. Losing
// the Lease otherwise is fatal: the process exits so it cannot act as a
// second leader.
func runWithLeaderElection(ctx context.Context, d *Deps, o *Options, controllers []Controller) error {
	logger := klog.FromContext(ctx)
	ns := o.LeaderElectionNamespace
	if ns == "" {
		ns = inClusterNamespace()
	}
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, o.LeaderElectionID,
		d.Kube.CoreV1(), d.Kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}

	// electionCtx outlives ctx until the controllers have returned.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	l := &leading{controllers: controllers, workers: o.Workers, done: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            o.LeaderElectionID,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				logger.Info("Acquired leadership; starting controllers", "lease", klog.KRef(ns, o.LeaderElectionID), "identity", id)
				l.run(ctx, leaderCtx)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					l.lost.Store(true)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(electionCtx)
	}()

	<-ctx.Done()
	select {
	case <-l.done:
	case <-elected:
	}
	if !l.lost.Load() {
		// Graceful stop: wait for the controllers (if leading), then release.
		select {
		case <-l.done:
		case <-time.After(o.ShutdownTimeout):
			logger.Info("Controllers did not stop in time; releasing the Lease anyway")
		case <-elected:
		}
	}
	stopElection()
	<-elected
	if l.lost.Load() {
		return fmt.Errorf("lost the leader Lease %s/%s", ns, o.LeaderElectionID)
	}
	logger.Info("Released the leader Lease", "lease", klog.KRef(ns, o.LeaderElectionID))
	return nil
}

// leading runs the controllers once while this replica leads.
type leading struct {
	controllers []Controller
	workers     int
	once        sync.Once
	// done is closed when the controllers have returned; lost is set when
	// the lease was lost while the manager was not shutting down.
	done chan struct{}
	lost atomic.Bool
}

// run runs the controllers (once) until ctx (a shutdown) or leaderCtx (a
// lost lease) is done.
func (l *leading) run(ctx, leaderCtx context.Context) {
	l.once.Do(func() {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-leaderCtx.Done():
				cancel()
			case <-runCtx.Done():
			}
		}()
		runControllers(runCtx, l.controllers, l.workers)
		close(l.done)
	})
}

// inClusterNamespace is the pod's namespace in-cluster, else kube-system.
func inClusterNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return metav1.NamespaceSystem
}
