package framework

// Helpers for fault-injection tests (test/faults/): managers whose logs
// outlive the test that ran them (for a package-wide X1 scan after some of
// them were killed), a recorder of every Job ever created, the manager's
// Prometheus counters (parsed by faultkit), and releasing leftover workload
// objects.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

var kept struct {
	sync.Mutex
	managers []*Manager
}

// StartManagerKeepLog is StartManager with the log written under the
// control plane's directory, where it stays until the package ends: a
// final X1 scan (KeptManagers, ScanFilesForSecretValues) then reads the log
// of every manager the package ran, killed ones included. The manager is
// stopped (SIGTERM) when the test ends.
func (e *Env) StartManagerKeepLog(t testing.TB, o ManagerOptions) *Manager {
	t.Helper()
	kept.Lock()
	dir := filepath.Join(e.CP.Dir, "managers", fmt.Sprintf("%03d", len(kept.managers)))
	kept.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return e.startManagerT(t, o, dir, 8000, func(m *Manager) {
		kept.Lock()
		kept.managers = append(kept.managers, m)
		kept.Unlock()
	})
}

// KeptManagers returns every manager StartManagerKeepLog started so far.
func KeptManagers() []*Manager {
	kept.Lock()
	defer kept.Unlock()
	return append([]*Manager(nil), kept.managers...)
}

// ScanFilesForSecretValues fails t when any file in paths contains one of
// the forbidden strings (SPEC X1); it returns the bytes scanned.
func ScanFilesForSecretValues(t testing.TB, paths []string, forbidden ...string) int {
	t.Helper()
	total := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("X1 scan: %v", err)
			continue
		}
		total += len(b)
		for _, s := range forbidden {
			if s != "" && strings.Contains(string(b), s) {
				t.Errorf("X1: %s contains a secret value or hash", p)
			}
		}
	}
	return total
}

// RequireNoSecretValuesAnywhere is a package's last X1 scan (SPEC X1):
// every event and captf status left (RequireNoSecretValues, with the log of
// the last kept manager) and the log of every manager StartManagerKeepLog
// ran, killed ones included. It returns how many logs and bytes it read.
func RequireNoSecretValuesAnywhere(t *testing.T, forbidden ...string) (logs, bytes int) {
	t.Helper()
	managers := KeptManagers()
	if len(managers) == 0 {
		t.Fatal("no manager ran in this package: the scan would prove nothing")
	}
	f := &Fixture{T: t, Env: Get(t), Ctx: Context(t), Manager: managers[len(managers)-1]}
	f.RequireNoSecretValues(forbidden...)
	var paths []string
	for _, m := range managers {
		paths = append(paths, m.LogPath)
	}
	return len(paths), ScanFilesForSecretValues(t, paths, forbidden...)
}

// ExitError reports whether the manager has exited, and its exit error.
func (m *Manager) ExitError() (exited bool, err error) {
	if !m.Exited() {
		return false, nil
	}
	return true, m.err
}

// Metrics returns the manager's /metrics text.
func (m *Manager) Metrics() (string, error) {
	code, body := m.Get(m.MetricsURL + "/metrics")
	if code != 200 {
		return "", fmt.Errorf("GET /metrics: %d %s", code, tail([]byte(body), 300))
	}
	return body, nil
}

// Scrape returns the manager's parsed /metrics.
func (m *Manager) Scrape() (faultkit.Metrics, error) {
	text, err := m.Metrics()
	if err != nil {
		return nil, err
	}
	return faultkit.ParseMetrics(text)
}

// WaitManagerQuiet waits until f's manager has had empty queues, no work
// in progress and made no request (but its Lease renewals and events) for
// quiet: a pass it had to make is over.
func (f *Fixture) WaitManagerQuiet(quiet time.Duration) {
	f.T.Helper()
	last, since := -1.0, time.Now()
	f.WaitFor("the manager to be quiet", func() (bool, string) {
		m, err := f.Manager.Scrape()
		if err != nil {
			return false, err.Error()
		}
		var reqs float64
		for _, s := range m {
			if r := s.Labels["resource"]; s.Name == "captf_api_requests_total" && r != "leases" && r != "events" {
				reqs += s.Value
			}
		}
		busy := m.Sum("workqueue_depth", nil) > 0 || m.Sum("workqueue_unfinished_work_seconds", nil) > 0
		if busy || reqs != last {
			last, since = reqs, time.Now()
		}
		return time.Since(since) >= quiet, fmt.Sprintf("busy=%v, %v requests", busy, reqs)
	})
}

// JobRecord is a Job as the recorder first saw it.
type JobRecord struct {
	Namespace, Name string
	UID             types.UID
	// Owner is the UID of the Job's controller (the workload object).
	Owner      types.UID
	OwnerKind  string
	OwnerName  string
	Action     v1alpha1.JobAction
	Generation string
	Seen       time.Time
}

func (r JobRecord) String() string {
	return fmt.Sprintf("%s/%s (%s of %s %s, generation %s)", r.Namespace, r.Name, r.Action, r.OwnerKind, r.OwnerName, r.Generation)
}

// JobRecorder records every Job labelled captf.io/managed=true that is ever
// created while it runs, by UID, so a Job the garbage collector deletes
// later still counts ("no Job was created twice" is checked on this record,
// not on a LIST at the end). It watches through an informer, which resumes
// its watch after an API server restart; a Job created and deleted within
// one outage could be missed, which fault tests avoid by not deleting Jobs.
type JobRecorder struct {
	mu    sync.Mutex
	jobs  map[types.UID]JobRecord
	onAdd func(JobRecord)
}

// RecordJobs starts a JobRecorder and waits for its first LIST. onAdd, if
// not nil, is called (from the informer's goroutine; it must not block) for
// every Job the first time it is seen. It stops when the test ends.
func (e *Env) RecordJobs(t testing.TB, onAdd func(JobRecord)) *JobRecorder {
	t.Helper()
	r := &JobRecorder{jobs: map[types.UID]JobRecord{}, onAdd: onAdd}
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(e.Kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue
	}))
	inf := factory.Batch().V1().Jobs().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.add,
		UpdateFunc: func(_, n interface{}) { r.add(n) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	ctx, cancel := context.WithTimeout(Context(t), time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("Job recorder: %v did not sync", typ)
		}
	}
	return r
}

func (r *JobRecorder) add(obj interface{}) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	r.mu.Lock()
	if _, seen := r.jobs[j.UID]; seen {
		r.mu.Unlock()
		return
	}
	rec := JobRecord{Namespace: j.Namespace, Name: j.Name, UID: j.UID,
		Action: v1alpha1.JobAction(j.Annotations[v1alpha1.AnnotationJobAction]), Generation: j.Annotations[v1alpha1.AnnotationJobGeneration], Seen: time.Now()}
	if c := metav1.GetControllerOf(j); c != nil {
		rec.Owner, rec.OwnerKind, rec.OwnerName = c.UID, c.Kind, c.Name
	}
	r.jobs[j.UID] = rec
	onAdd := r.onAdd
	r.mu.Unlock()
	if onAdd != nil {
		onAdd(rec)
	}
}

// Jobs returns every Job recorded so far whose owner is in owners (all
// when owners is nil), sorted by first sight.
func (r *JobRecorder) Jobs(owners map[types.UID]bool) []JobRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []JobRecord
	for _, j := range r.jobs {
		if owners == nil || owners[j.Owner] {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Seen.Before(out[k].Seen) })
	return out
}

// Of returns the recorded Jobs of owner with action.
func (r *JobRecorder) Of(owner types.UID, action v1alpha1.JobAction) []JobRecord {
	var out []JobRecord
	for _, j := range r.Jobs(map[types.UID]bool{owner: true}) {
		if j.Action == action {
			out = append(out, j)
		}
	}
	return out
}

// DeleteWorkloads removes every captf workload object from namespaces
// without destroying anything: it removes the finalizer captf.io/destroy,
// deletes the objects, their Jobs and their mirrors, and waits until the
// objects are gone. It is test clean-up for objects a stopped manager left
// behind: a later test's manager would otherwise see objects that still
// have apply Jobs, put the finalizer back (J8) and leave their namespaces
// terminating forever. Stop the test's managers first.
func (e *Env) DeleteWorkloads(ctx context.Context, namespaces []string) error {
	api := e.Captf.InfrastructureV1alpha1()
	strip := func(fs []string) ([]string, bool) {
		var out []string
		for _, f := range fs {
			if f != v1alpha1.FinalizerDestroy {
				out = append(out, f)
			}
		}
		return out, len(out) != len(fs)
	}
	release := func(get func() (metav1.Object, error), update func(metav1.Object) error) error {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			o, err := get()
			if err != nil {
				return err
			}
			fs, changed := strip(o.GetFinalizers())
			if !changed {
				return nil
			}
			o.SetFinalizers(fs)
			return update(o)
		})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	background := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &background}
	managed := metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue}
	for _, ns := range namespaces {
		clusters, err := api.TerraformClusters(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, c := range clusters.Items {
			if err := release(func() (metav1.Object, error) {
				return api.TerraformClusters(ns).Get(ctx, c.Name, metav1.GetOptions{})
			}, func(o metav1.Object) error {
				_, err := api.TerraformClusters(ns).Update(ctx, o.(*v1alpha1.TerraformCluster), metav1.UpdateOptions{})
				return err
			}); err != nil {
				return err
			}
		}
		machines, err := api.TerraformMachines(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, m := range machines.Items {
			if err := release(func() (metav1.Object, error) {
				return api.TerraformMachines(ns).Get(ctx, m.Name, metav1.GetOptions{})
			}, func(o metav1.Object) error {
				_, err := api.TerraformMachines(ns).Update(ctx, o.(*v1alpha1.TerraformMachine), metav1.UpdateOptions{})
				return err
			}); err != nil {
				return err
			}
		}
		pools, err := api.TerraformMachinePools(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range pools.Items {
			if err := release(func() (metav1.Object, error) {
				return api.TerraformMachinePools(ns).Get(ctx, p.Name, metav1.GetOptions{})
			}, func(o metav1.Object) error {
				_, err := api.TerraformMachinePools(ns).Update(ctx, o.(*v1alpha1.TerraformMachinePool), metav1.UpdateOptions{})
				return err
			}); err != nil {
				return err
			}
		}
		for _, err := range []error{
			api.TerraformClusters(ns).DeleteCollection(ctx, del, metav1.ListOptions{}),
			api.TerraformMachines(ns).DeleteCollection(ctx, del, metav1.ListOptions{}),
			api.TerraformMachinePools(ns).DeleteCollection(ctx, del, metav1.ListOptions{}),
			e.Kube.BatchV1().Jobs(ns).DeleteCollection(ctx, del, managed),
			e.Kube.CoreV1().Secrets(ns).DeleteCollection(ctx, del, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, ns := range namespaces {
		for {
			c, err1 := api.TerraformClusters(ns).List(ctx, metav1.ListOptions{})
			m, err2 := api.TerraformMachines(ns).List(ctx, metav1.ListOptions{})
			p, err3 := api.TerraformMachinePools(ns).List(ctx, metav1.ListOptions{})
			if err1 == nil && err2 == nil && err3 == nil && len(c.Items)+len(m.Items)+len(p.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("workload objects still in namespace %s after 2 minutes", ns)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// Parallel runs fn(i) for i in [0, n) on workers goroutines and returns
// the first error (faultkit.Parallel without a context).
func Parallel(n, workers int, fn func(i int) error) error {
	return faultkit.Parallel(context.Background(), n, workers, func(_ context.Context, i int) error { return fn(i) })
}
