package load

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// The three workload kinds, by their Kind.
const (
	kindCluster = faultkit.KindCluster
	kindMachine = faultkit.KindMachine
	kindPool    = faultkit.KindPool
)

var kinds = faultkit.Kinds

// moduleImage makes objects start Jobs; "" makes them stop at the mirror.
const moduleImage = "example.com/module:1"

// workload is one created TerraformCluster, TerraformMachine or
// TerraformMachinePool; state what it looks like now.
type (
	workload = faultkit.Workload
	state    = faultkit.State
)

// create creates a workload object of kind whose spec.identityRef names
// identity ("" for none), with labels, starting Jobs when image is set.
func create(ctx context.Context, e *framework.Env, kind, ns, name, identity, image string, labels map[string]string) (workload, error) {
	return faultkit.CreateWorkload(ctx, e.Captf, kind, ns, name, identity, image, labels)
}

// mustCreate is create failing the test.
func mustCreate(f *framework.Fixture, kind, ns, name, identity, image string) workload {
	f.T.Helper()
	w, err := create(f.Ctx, f.Env, kind, ns, name, identity, image, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	return w
}

// get reads a workload object.
func get(ctx context.Context, e *framework.Env, w workload) (state, error) {
	return faultkit.GetWorkload(ctx, e.Captf, w)
}

// conds returns a getter of a workload object's conditions for WaitCondition.
func conds(f *framework.Fixture, w workload) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		s, err := get(f.Ctx, f.Env, w)
		if err == nil && !s.Exists {
			err = fmt.Errorf("%s does not exist", w)
		}
		return s.Conditions, err
	}
}

// del deletes a workload object.
func del(ctx context.Context, e *framework.Env, w workload) error {
	return faultkit.DeleteWorkload(ctx, e.Captf, w)
}

// annotate sets an annotation on a workload object (retrying conflicts).
func annotate(ctx context.Context, e *framework.Env, w workload, key, value string) error {
	return faultkit.AnnotateWorkload(ctx, e.Captf, w, key, value)
}

// condIs reports whether conds has t with status (and reason, unless "").
func condIs(conds []metav1.Condition, t v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) bool {
	c := meta.FindStatusCondition(conds, string(t))
	return c != nil && c.Status == status && (reason == "" || c.Reason == string(reason))
}

// mirrorsOf returns the real mirrors of identity in every namespace, by
// namespace (label captf.io/mirrored=true and the identity annotation).
func mirrorsOf(ctx context.Context, e *framework.Env, identity string) (map[string]*corev1.Secret, error) {
	l, err := e.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Secret{}
	for i := range l.Items {
		s := &l.Items[i]
		if s.Annotations[v1alpha1.AnnotationIdentity] == identity {
			out[s.Namespace] = s
		}
	}
	return out, nil
}

// ownerUIDs returns a Secret's owner UIDs.
func ownerUIDs(s *corev1.Secret) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, r := range s.OwnerReferences {
		out[r.UID] = true
	}
	return out
}

// sameUIDs compares the owner UIDs of a mirror with want; "" when equal,
// else what differs.
func sameUIDs(s *corev1.Secret, want []workload) string {
	got := ownerUIDs(s)
	var missing, extra []string
	seen := map[types.UID]bool{}
	for _, w := range want {
		seen[w.UID] = true
		if !got[w.UID] {
			missing = append(missing, w.Name)
		}
	}
	for _, r := range s.OwnerReferences {
		if !seen[r.UID] {
			extra = append(extra, r.Kind+"/"+r.Name)
		}
	}
	if len(s.OwnerReferences) != len(got) {
		extra = append(extra, fmt.Sprintf("(%d references for %d UIDs: duplicates)", len(s.OwnerReferences), len(got)))
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("%d owner references; missing %d %v; extra %v", len(s.OwnerReferences), len(missing), head(missing, 5), extra)
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// editIdentity updates an identity, retrying conflicts with the manager's
// status writes.
func editIdentity(ctx context.Context, e *framework.Env, name string, edit func(*v1alpha1.TerraformClusterIdentity)) error {
	ids := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		i, err := ids.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(i)
		_, err = ids.Update(ctx, i, metav1.UpdateOptions{})
		return err
	})
}

// setSource replaces the data of a source Secret (a rotation).
func setSource(ctx context.Context, e *framework.Env, ref v1alpha1.SecretReference, data map[string]string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data, s.StringData = nil, data
		_, err = e.Kube.CoreV1().Secrets(ref.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
}

// scrape reads the manager's /metrics, failing the test.
func scrape(f *framework.Fixture) faultkit.Metrics {
	f.T.Helper()
	var m faultkit.Metrics
	// The manager may be busy on a loaded machine: retry a little.
	framework.Eventually(f.T, 30*time.Second, func() (bool, string) {
		var err error
		m, err = faultkit.Scrape(f.Ctx, f.Manager.MetricsURL+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return m
}

// klogError matches klog's error lines (E1129 20:15:04.123456 ...).
var klogError = regexp.MustCompile(`(?m)^E\d{4} `)

// logFacts counts what matters in a stretch of manager log.
type logFacts struct {
	Lines, Errors, Requeues, Panics, RejectedEvents int
}

func factsOf(log string) logFacts {
	return logFacts{
		Lines:          strings.Count(log, "\n"),
		Errors:         len(klogError.FindAllStringIndex(log, -1)),
		Requeues:       strings.Count(log, "Requeuing after error"),
		Panics:         strings.Count(log, "panic"),
		RejectedEvents: strings.Count(log, "Server rejected event"),
	}
}

// requireLogClean fails the test if the manager's log holds a forbidden
// string (X1) or a panic.
func requireLogClean(f *framework.Fixture, forbidden ...string) {
	f.T.Helper()
	log := f.Manager.Log()
	if len(log) == 0 {
		f.T.Fatal("the manager log is empty: the scan would prove nothing")
	}
	for _, s := range forbidden {
		if strings.Contains(log, s) {
			f.T.Errorf("X1: the manager log contains a secret value or hash (%d bytes scanned)", len(log))
		}
	}
	if strings.Contains(log, "panic") {
		f.T.Errorf("the manager log mentions a panic:\n%s", grep(log, "panic", 20))
	}
}

// grep returns up to n lines of log containing s.
func grep(log, s string, n int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// finisher completes every captf Job in its namespaces, as the Job
// controller would when the pod ends (there is no kubelet), until stopped.
type finisher struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	// finished counts Jobs finished by action.
	finished map[v1alpha1.JobAction]int
	// seen counts Jobs by owner UID, action and generation (duplicates
	// would be a J1 violation).
	seen map[string]int
}

// startFinisher finishes Jobs in namespaces (each successfully) every
// interval until the test ends or Stop.
func startFinisher(f *framework.Fixture, interval time.Duration, namespaces ...string) *finisher {
	fin := &finisher{stop: make(chan struct{}), done: make(chan struct{}), finished: map[v1alpha1.JobAction]int{}, seen: map[string]int{}}
	go func() {
		defer close(fin.done)
		for {
			for _, ns := range namespaces {
				l, err := f.Env.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
				if err != nil {
					continue
				}
				for i := range l.Items {
					j := &l.Items[i]
					if jobs.Finished(j) || j.DeletionTimestamp != nil {
						continue
					}
					if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err == nil {
						fin.mu.Lock()
						fin.finished[jobs.ActionOf(j)]++
						fin.mu.Unlock()
					}
				}
			}
			select {
			case <-fin.stop:
				return
			case <-f.Ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	f.T.Cleanup(fin.Stop)
	return fin
}

// Stop stops the finisher and waits for it.
func (fin *finisher) Stop() {
	select {
	case <-fin.stop:
	default:
		close(fin.stop)
	}
	<-fin.done
}

// jobsPerOwner lists the captf Jobs of namespace by "owner-uid action
// generation" (more than one for a key would break J1).
func jobsPerOwner(f *framework.Fixture, ns string) map[string][]string {
	f.T.Helper()
	l, err := f.Env.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
	if err != nil {
		f.T.Fatal(err)
	}
	out := map[string][]string{}
	for i := range l.Items {
		j := &l.Items[i]
		owner := metav1.GetControllerOf(j)
		if owner == nil {
			continue
		}
		g, _ := jobs.GenerationOf(j)
		key := fmt.Sprintf("%s %s %d", owner.UID, jobs.ActionOf(j), g)
		out[key] = append(out[key], j.Name)
	}
	return out
}

// describeConds formats conditions one per line, for the report.
func describeConds(cs []metav1.Condition) string {
	sorted := append([]metav1.Condition(nil), cs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Type < sorted[j].Type })
	var b strings.Builder
	for _, c := range sorted {
		fmt.Fprintf(&b, "\n    %s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// since formats a duration for the report.
func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// releaseAtEnd makes the test's end leave nothing behind in namespaces:
// before they are deleted (call it after creating them, and after starting
// the test's own manager, so it runs first), every workload object there
// gets the abandon annotation and is deleted, and the test waits until the
// manager has let them go. Otherwise an object whose apply Job ran keeps
// its captf.io/destroy finalizer in a terminating namespace for ever
// (fault 8), and later tests' managers would find it.
func releaseAtEnd(f *framework.Fixture, namespaces ...string) {
	f.T.Cleanup(func() {
		ctx := context.Background()
		var left []workload
		for _, ns := range namespaces {
			objs, err := listNamed(ctx, f.Env, ns)
			if err != nil {
				f.T.Logf("cleanup: listing %s: %v", ns, err)
			}
			left = append(left, objs...)
		}
		for _, w := range left {
			_ = annotate(ctx, f.Env, w, v1alpha1.AnnotationAbandonInfrastructure, string(w.UID))
			_ = del(ctx, f.Env, w)
		}
		deadline := time.Now().Add(60 * time.Second)
		for _, w := range left {
			for time.Now().Before(deadline) {
				if s, err := get(ctx, f.Env, w); err == nil && !s.Exists {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if s, err := get(ctx, f.Env, w); err == nil && s.Exists {
				f.T.Logf("cleanup: %s still exists (finalizers %v)", w, s.Finalizers)
			}
		}
	})
}

// listNamed lists the workload objects of a namespace.
func listNamed(ctx context.Context, e *framework.Env, ns string) ([]workload, error) {
	var out []workload
	api := e.Captf.InfrastructureV1alpha1()
	clusters, err := api.TerraformClusters(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range clusters.Items {
		out = append(out, workload{Kind: kindCluster, Namespace: ns, Name: o.Name, UID: o.UID})
	}
	machines, err := api.TerraformMachines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range machines.Items {
		out = append(out, workload{Kind: kindMachine, Namespace: ns, Name: o.Name, UID: o.UID})
	}
	pools, err := api.TerraformMachinePools(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, o := range pools.Items {
		out = append(out, workload{Kind: kindPool, Namespace: ns, Name: o.Name, UID: o.UID})
	}
	return out, nil
}
