package soak

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

var (
	flagDuration   = flag.Duration("duration", 30*time.Minute, "how long the random operations run (cleanup and the final checks follow)")
	flagCheck      = flag.Duration("check-every", time.Minute, "interval between invariant checks and resource samples")
	flagNamespaces = flag.Int("namespaces", 50, "namespaces the operations spread over")
	flagSync       = flag.Duration("sync-period", 30*time.Second, "the manager's --sync-period")
	flagResync     = flag.Duration("identity-resync", 15*time.Second, "the manager's --identity-resync")
	flagSlack      = flag.Duration("slack", 30*time.Second, "added to the sync period: the bound within which a change must reach every mirror")
	flagOpEvery    = flag.Duration("op-every", 2*time.Second, "mean interval between random operations")
	flagMaxObjects = flag.Int("max-objects", 150, "most workload objects alive at once")
	flagSeed       = flag.Uint64("seed", 0, "random seed; 0 picks one (logged)")
)

// soakValue starts every credential value of the soak; the X1 scans look
// for it.
const soakValue = "soak-Cr3dential-VALUE-a41c07"

const moduleImage = "example.com/module:1"

// identity is the test's model of one TerraformClusterIdentity.
type identity struct {
	name string
	ref  v1alpha1.SecretReference
	// selector: allowed by a namespace label (else by spec.allowedNamespaces.list).
	selector bool
	// hashes is the source's history, oldest first.
	hashes []hashSince
	// allowed and changed: whether each namespace is allowed, and since when.
	allowed map[string]bool
	changed map[string]time.Time
}

type hashSince struct {
	hash  string
	since time.Time
}

// object is the test's model of one workload object.
type object struct {
	w        faultkit.Workload
	identity string
	created  time.Time
	// deleted is when the test deleted it; gone when it was first seen gone.
	deleted, gone time.Time
}

// sample is one row of the resource table.
type sample struct {
	at                      time.Duration
	rss, heap               int64
	goroutines              float64
	objects, mirrors, jobs  int
	requests, writes, reads float64
	violations              int
}

type soak struct {
	t     *testing.T
	f     *framework.Fixture
	e     *framework.Env
	ctx   context.Context
	rng   *rand.Rand
	run   string // label value of everything this soak creates
	bound time.Duration
	pid   int
	start time.Time

	mu         sync.Mutex
	namespaces []string
	ids        []*identity
	objects    map[types.UID]*object
	seq        int
	ops        map[string]int
	values     []string
	violations []string
	samples    []sample
	last       faultkit.Metrics
}

func TestSoak(t *testing.T) {
	if os.Getenv("CAPTF_SOAK") != "1" {
		t.Skip("the soak runs only with CAPTF_SOAK=1 (make soak)")
	}
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	e := framework.Get(t)
	args := []string{"--sync-period=" + flagSync.String(), "--identity-resync=" + flagResync.String(), "--workers=4"}
	m := e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Args: args})
	f := &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: 5 * time.Minute}
	pid := m.PID()
	s := &soak{t: t, f: f, e: e, ctx: f.Ctx, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), run: utilrand.String(6),
		bound: *flagSync + *flagSlack, pid: pid, objects: map[types.UID]*object{}, ops: map[string]int{}}
	t.Logf("soak: seed %d, %s of operations every ~%s over %d namespaces, checks every %s, bound %s (sync period %s + slack %s), manager pid %d",
		seed, *flagDuration, *flagOpEvery, *flagNamespaces, *flagCheck, s.bound, *flagSync, *flagSlack, pid)

	s.setup()
	s.start = time.Now()
	s.last = s.scrape()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { s.observe(stop) })
	bg.Go(func() { s.finishJobs(stop) })

	end := s.start.Add(*flagDuration)
	nextCheck := s.start.Add(*flagCheck)
	for time.Now().Before(end) {
		if m.Exited() {
			t.Fatalf("the manager exited: %v", m.Wait())
		}
		if !time.Now().Before(nextCheck) {
			s.check("run")
			nextCheck = nextCheck.Add(*flagCheck)
		}
		s.op()
		d := time.Duration(float64(*flagOpEvery) * (0.5 + s.rng.Float64()))
		time.Sleep(d) // the operations' pace
	}
	s.check("end of operations")
	t.Logf("soak: operations %v", s.ops)

	// Cleanup: allow everything again (so waiting destroys run), delete
	// every object, and check that no mirror is left.
	s.cleanup()
	close(stop)
	bg.Wait()
	s.check("after cleanup")
	s.report()
	forbidden := slices.Clone(s.values)
	for _, id := range s.ids {
		for _, h := range id.hashes {
			forbidden = append(forbidden, h.hash)
		}
	}
	f.RequireNoSecretValues(forbidden...)
	if log := m.Log(); strings.Contains(log, "panic") {
		t.Errorf("the manager's log mentions a panic")
	}
	if len(s.violations) > 0 {
		t.Errorf("%d invariant violations; the first ones:\n%s", len(s.violations), strings.Join(s.violations[:min(len(s.violations), 30)], "\n"))
	}
}

// setup creates the namespaces, three identities (two by list, one by
// selector) each allowing a random ~60% of the namespaces, and two objects
// per namespace.
func (s *soak) setup() {
	t := s.t
	for i := range *flagNamespaces {
		ns := fmt.Sprintf("soak-%s-%02d", s.run, i)
		if _, err := s.e.Kube.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"captf-soak": s.run}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s.namespaces = append(s.namespaces, ns)
	}
	creds := s.e.CreateNamespace(t, "soak-creds", nil)
	for i := range 3 {
		id := &identity{name: fmt.Sprintf("soak-%s-%d", s.run, i), selector: i == 1, allowed: map[string]bool{}, changed: map[string]time.Time{}}
		id.ref = v1alpha1.SecretReference{Namespace: creds, Name: id.name}
		data := s.nextData(id)
		if _, err := s.e.Kube.CoreV1().Secrets(creds).Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: creds, Name: id.name}, StringData: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		id.hashes = append(id.hashes, hashSince{framework.HashOf(data), time.Now()})
		var list []string
		for _, ns := range s.namespaces {
			if s.rng.Float64() < 0.6 {
				id.allowed[ns] = true
				list = append(list, ns)
			}
		}
		spec := v1alpha1.TerraformClusterIdentitySpec{SecretRef: id.ref, AllowedNamespaces: &v1alpha1.AllowedNamespaces{List: list}}
		if id.selector {
			for _, ns := range list {
				if err := s.label(ns, id, true); err != nil {
					t.Fatal(err)
				}
			}
			spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{s.selectorKey(): "in"}}}
		}
		if _, err := s.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(s.ctx,
			&v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: id.name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s.ids = append(s.ids, id)
	}
	for range 2 * len(s.namespaces) {
		s.create()
	}
}

func (s *soak) selectorKey() string { return "captf-soak-" + s.run }

// nextData returns the next credential of id (a rotation).
func (s *soak) nextData(id *identity) map[string]string {
	v := fmt.Sprintf("%s-%s-%d", soakValue, id.name[len(id.name)-1:], len(id.hashes))
	s.values = append(s.values, v)
	return map[string]string{"AWS_ACCESS_KEY_ID": "AKIASOAK", "AWS_SECRET_ACCESS_KEY": v}
}

// label sets or removes the selector identity's label on ns.
func (s *soak) label(ns string, id *identity, in bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.e.Kube.CoreV1().Namespaces().Get(s.ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if in {
			n.Labels[s.selectorKey()] = "in"
		} else {
			delete(n.Labels, s.selectorKey())
		}
		_, err = s.e.Kube.CoreV1().Namespaces().Update(s.ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// op runs one random operation.
func (s *soak) op() {
	x := s.rng.Float64()
	switch {
	case x < 0.10:
		s.rotate()
	case x < 0.20:
		s.allow(false)
	case x < 0.30:
		s.allow(true)
	case x < 0.65:
		s.create()
	default:
		s.remove()
	}
}

func (s *soak) rotate() {
	id := s.ids[s.rng.IntN(len(s.ids))]
	s.mu.Lock()
	data := s.nextData(id)
	s.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := s.e.Kube.CoreV1().Secrets(id.ref.Namespace).Get(s.ctx, id.ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sec.Data, sec.StringData = nil, data
		_, err = s.e.Kube.CoreV1().Secrets(id.ref.Namespace).Update(s.ctx, sec, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Logf("soak: rotating %s: %v", id.name, err)
		return
	}
	s.mu.Lock()
	id.hashes = append(id.hashes, hashSince{framework.HashOf(data), time.Now()})
	s.ops["rotate"]++
	s.mu.Unlock()
}

// allow re-allows (true) or revokes (false) a random namespace of a random
// identity; revocation keeps at least a third of the namespaces allowed.
func (s *soak) allow(allow bool) {
	id := s.ids[s.rng.IntN(len(s.ids))]
	var candidates []string
	s.mu.Lock()
	for _, ns := range s.namespaces {
		if id.allowed[ns] != allow {
			candidates = append(candidates, ns)
		}
	}
	allowedCount := 0
	for _, ok := range id.allowed {
		if ok {
			allowedCount++
		}
	}
	s.mu.Unlock()
	if len(candidates) == 0 || (!allow && allowedCount <= len(s.namespaces)/3) {
		return
	}
	ns := candidates[s.rng.IntN(len(candidates))]
	var err error
	if id.selector {
		err = s.label(ns, id, allow)
	} else {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ids := s.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
			i, err := ids.Get(s.ctx, id.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			list := slices.DeleteFunc(slices.Clone(i.Spec.AllowedNamespaces.List), func(x string) bool { return x == ns })
			if allow {
				list = append(list, ns)
			}
			i.Spec.AllowedNamespaces.List = list
			_, err = ids.Update(s.ctx, i, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		s.t.Logf("soak: allow=%v %s in %s: %v", allow, id.name, ns, err)
		return
	}
	s.mu.Lock()
	id.allowed[ns] = allow
	id.changed[ns] = time.Now()
	if allow {
		s.ops["re-allow"]++
	} else {
		s.ops["revoke"]++
	}
	s.mu.Unlock()
}

// create creates a random object (half of them start Jobs).
func (s *soak) create() {
	s.mu.Lock()
	alive := 0
	for _, o := range s.objects {
		if o.deleted.IsZero() {
			alive++
		}
	}
	s.seq++
	name := fmt.Sprintf("o-%05d", s.seq)
	s.mu.Unlock()
	if alive >= *flagMaxObjects {
		s.remove()
		return
	}
	ns := s.namespaces[s.rng.IntN(len(s.namespaces))]
	id := s.ids[s.rng.IntN(len(s.ids))]
	kind := faultkit.Kinds[s.rng.IntN(3)]
	image := ""
	if s.rng.IntN(2) == 0 {
		image = moduleImage
	}
	w, err := faultkit.CreateWorkload(s.ctx, s.e.Captf, kind, ns, name, id.name, image, map[string]string{"captf-soak": s.run})
	if err != nil {
		s.t.Logf("soak: %v", err)
		return
	}
	s.mu.Lock()
	s.objects[w.UID] = &object{w: w, identity: id.name, created: time.Now()}
	s.ops["create"]++
	s.mu.Unlock()
}

// remove deletes a random live object.
func (s *soak) remove() {
	s.mu.Lock()
	var live []*object
	for _, o := range s.objects {
		if o.deleted.IsZero() {
			live = append(live, o)
		}
	}
	s.mu.Unlock()
	if len(live) == 0 {
		return
	}
	sort.Slice(live, func(i, j int) bool { return live[i].w.Name < live[j].w.Name })
	o := live[s.rng.IntN(len(live))]
	if err := faultkit.DeleteWorkload(s.ctx, s.e.Captf, o.w); err != nil {
		s.t.Logf("soak: deleting %s: %v", o.w, err)
		return
	}
	s.mu.Lock()
	o.deleted = time.Now()
	s.ops["delete"]++
	s.mu.Unlock()
}

// observe records when each object is first seen gone.
func (s *soak) observe(stop <-chan struct{}) {
	for {
		if objs, err := faultkit.ListWorkloads(s.ctx, s.e.Captf, "", "captf-soak="+s.run); err == nil {
			now := time.Now()
			s.mu.Lock()
			for uid, o := range s.objects {
				if _, ok := objs[uid]; !ok && o.gone.IsZero() && time.Since(o.created) > 5*time.Second {
					o.gone = now
				}
			}
			s.mu.Unlock()
		}
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// finishJobs completes each captf Job a few seconds after it was created,
// as the Job controller would when its pod ends (there is no kubelet).
func (s *soak) finishJobs(stop <-chan struct{}) {
	for {
		l, err := s.e.Kube.BatchV1().Jobs("").List(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
		if err == nil {
			for i := range l.Items {
				j := &l.Items[i]
				if !strings.HasPrefix(j.Namespace, "soak-"+s.run) || jobs.Finished(j) || time.Since(j.CreationTimestamp.Time) < 3*time.Second {
					continue
				}
				if err := s.e.FinishJob(s.ctx, j.Namespace, j.Name, ""); err == nil {
					s.mu.Lock()
					s.ops["finish "+string(jobs.ActionOf(j))]++
					s.mu.Unlock()
				}
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// check verifies the invariants against the cluster now, with the bound
// as tolerance for every change the test made, and samples the manager's
// resources.
func (s *soak) check(phase string) {
	now := time.Now()
	secrets, err := s.e.Kube.CoreV1().Secrets("").List(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue})
	if err != nil {
		s.t.Fatal(err)
	}
	live, err := faultkit.ListWorkloads(s.ctx, s.e.Captf, "", "captf-soak="+s.run)
	if err != nil {
		s.t.Fatal(err)
	}
	mirrors := map[string]map[string]*corev1.Secret{} // identity -> namespace -> mirror
	count := 0
	for i := range secrets.Items {
		m := &secrets.Items[i]
		if !strings.HasPrefix(m.Namespace, "soak-"+s.run) {
			continue
		}
		id := m.Annotations[v1alpha1.AnnotationIdentity]
		if mirrors[id] == nil {
			mirrors[id] = map[string]*corev1.Secret{}
		}
		mirrors[id][m.Namespace] = m
		count++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, o := range s.objects {
		if _, ok := live[uid]; !ok && o.gone.IsZero() {
			o.gone = now // gone since the observer's last look
		}
	}
	var bad []string
	fail := func(format string, args ...any) {
		bad = append(bad, fmt.Sprintf("[%s +%s] ", phase, now.Sub(s.start).Round(time.Second))+fmt.Sprintf(format, args...))
	}
	old := func(t time.Time) bool { return now.Sub(t) > s.bound }
	for _, id := range s.ids {
		current := id.hashes[len(id.hashes)-1]
		acceptable := map[string]bool{current.hash: true}
		for i := 0; i+1 < len(id.hashes); i++ {
			if !old(id.hashes[i+1].since) {
				acceptable[id.hashes[i].hash] = true
			}
		}
		for _, ns := range s.namespaces {
			m := mirrors[id.name][ns]
			stable := old(id.changed[ns]) // zero time: allowed or not since setup
			var users []*object
			hasUser := false
			for _, o := range s.objects {
				if o.identity != id.name || o.w.Namespace != ns {
					continue
				}
				st, exists := live[o.w.UID]
				if exists || !old(o.gone) {
					hasUser = true // a user, or one gone less than the bound ago
				}
				if exists && !st.Deleting && o.deleted.IsZero() && old(o.created) {
					users = append(users, o)
				}
			}
			switch {
			case m != nil && !id.allowed[ns] && stable:
				fail("V1/V5: mirror of %s in %s, not allowed there for %s", id.name, ns, now.Sub(id.changed[ns]).Round(time.Second))
			case m != nil && !hasUser:
				fail("V3: mirror of %s in %s has no user (owners %d)", id.name, ns, len(m.OwnerReferences))
			case m != nil && id.allowed[ns] && stable && len(users) > 0 && !acceptable[m.Annotations[v1alpha1.AnnotationSourceHash]]:
				fail("R2: mirror of %s in %s is stale: the source changed %s ago", id.name, ns, now.Sub(current.since).Round(time.Second))
			case m == nil && id.allowed[ns] && stable && len(users) > 0:
				fail("M2: %d users of %s in %s (allowed) have no mirror, the oldest created %s ago", len(users), id.name, ns, now.Sub(users[0].created).Round(time.Second))
			}
			if m != nil && id.allowed[ns] && stable {
				owners := map[types.UID]bool{}
				for _, r := range m.OwnerReferences {
					owners[r.UID] = true
				}
				for _, u := range users {
					if !owners[u.w.UID] {
						fail("M5: mirror of %s in %s lacks the owner reference of %s (created %s ago)", id.name, ns, u.w, now.Sub(u.created).Round(time.Second))
					}
				}
			}
		}
	}
	if log := s.f.Manager.Log(); strings.Contains(log, soakValue) {
		fail("X1: the manager's log contains a credential value")
	}
	// Resources.
	rss, _ := faultkit.RSS(s.pid)
	met := s.scrapeLocked()
	d := faultkit.Diff(s.last, met)
	s.last = met
	jobsCount := 0
	if l, err := s.e.Kube.BatchV1().Jobs("").List(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue}); err == nil {
		for _, j := range l.Items {
			if strings.HasPrefix(j.Namespace, "soak-"+s.run) {
				jobsCount++
			}
		}
	}
	s.samples = append(s.samples, sample{at: now.Sub(s.start), rss: rss, heap: int64(met.Sum("go_memstats_heap_inuse_bytes", nil)),
		goroutines: met.Sum("go_goroutines", nil), objects: len(live), mirrors: count, jobs: jobsCount,
		requests: d.TotalRequests(), writes: d.MirrorWrites(), reads: d.Sum("captf_source_reads_total", nil), violations: len(bad)})
	s.violations = append(s.violations, bad...)
	last := s.samples[len(s.samples)-1]
	s.t.Logf("soak %s +%s: %d objects, %d mirrors, %d Jobs; RSS %.1f MiB, goroutines %.0f; since last check %.0f API requests, %.0f mirror writes; %d violations%s",
		phase, last.at.Round(time.Second), last.objects, last.mirrors, last.jobs, faultkit.MiB(last.rss), last.goroutines, last.requests, last.writes, len(bad), firstLines(bad, 5))
}

func firstLines(s []string, n int) string {
	if len(s) == 0 {
		return ""
	}
	return "\n  " + strings.Join(s[:min(n, len(s))], "\n  ")
}

func (s *soak) scrape() faultkit.Metrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scrapeLocked()
}

func (s *soak) scrapeLocked() faultkit.Metrics {
	for range 10 {
		m, err := faultkit.Scrape(s.ctx, s.f.Manager.MetricsURL+"/metrics")
		if err == nil {
			return m
		}
		time.Sleep(time.Second)
	}
	s.t.Fatalf("cannot scrape the manager's metrics")
	return nil
}

// cleanup allows every namespace again, deletes every object, waits until
// they are gone, then until no mirror is left in the soak's namespaces.
func (s *soak) cleanup() {
	t := s.t
	start := time.Now()
	for _, id := range s.ids {
		for _, ns := range s.namespaces {
			s.mu.Lock()
			allowed := id.allowed[ns]
			s.mu.Unlock()
			if allowed {
				continue
			}
			if id.selector {
				if err := s.label(ns, id, true); err != nil {
					t.Fatal(err)
				}
			}
			s.mu.Lock()
			id.allowed[ns], id.changed[ns] = true, time.Now()
			s.mu.Unlock()
		}
		if !id.selector {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				ids := s.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
				i, err := ids.Get(s.ctx, id.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				i.Spec.AllowedNamespaces.List = slices.Clone(s.namespaces)
				_, err = ids.Update(s.ctx, i, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	s.mu.Lock()
	var all []*object
	for _, o := range s.objects {
		all = append(all, o)
	}
	s.mu.Unlock()
	for _, o := range all {
		if err := faultkit.DeleteWorkload(s.ctx, s.e.Captf, o.w); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		if o.deleted.IsZero() {
			o.deleted = time.Now()
		}
		s.mu.Unlock()
	}
	framework.Eventually(t, 10*time.Minute, func() (bool, string) {
		live, err := faultkit.ListWorkloads(s.ctx, s.e.Captf, "", "captf-soak="+s.run)
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, st := range live {
			left = append(left, fmt.Sprintf("%s%s", st.UID, describe(st.Conditions)))
		}
		return len(live) == 0, fmt.Sprintf("%d objects left: %v", len(live), left[:min(3, len(left))])
	})
	objectsGone := time.Since(start)
	framework.Eventually(t, s.bound+2*time.Minute, func() (bool, string) {
		l, err := s.e.Kube.CoreV1().Secrets("").List(s.ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, m := range l.Items {
			if strings.HasPrefix(m.Namespace, "soak-"+s.run) {
				left = append(left, m.Namespace+"/"+m.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("V3: %d mirrors left without users: %v", len(left), left[:min(5, len(left))])
	})
	t.Logf("soak: cleanup: every object gone %s after the cleanup began, every mirror %s", objectsGone.Round(time.Second), time.Since(start).Round(time.Second))
	t.Cleanup(func() {
		for _, ns := range s.namespaces {
			_ = s.e.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
}

func describe(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Status != metav1.ConditionTrue {
			fmt.Fprintf(&b, " %s=%s/%s", c.Type, c.Status, c.Reason)
		}
	}
	return b.String()
}

// report logs the resource table and flags growth of RSS or goroutines.
func (s *soak) report() {
	t := s.t
	var b strings.Builder
	fmt.Fprintf(&b, "\n| t | objects | mirrors | Jobs | RSS MiB | heap MiB | goroutines | API req | mirror writes | source reads | violations |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range s.samples {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f | %d |\n", x.at.Round(time.Second), x.objects, x.mirrors, x.jobs,
			faultkit.MiB(x.rss), faultkit.MiB(x.heap), x.goroutines, x.requests, x.writes, x.reads, x.violations)
	}
	t.Logf("soak: resources over time (API requests, writes and reads since the previous row):%s", b.String())
	// The run's samples (not the one after cleanup, with fewer objects):
	// the first is warm-up, then compare the first and last thirds.
	run := s.samples
	if len(run) > 1 {
		run = run[:len(run)-1]
	}
	if len(run) < 3 {
		t.Logf("soak: %d samples: too few for a trend (run longer than 3 check intervals)", len(run))
		return
	}
	rss := make([]float64, len(run))
	gor := make([]float64, len(run))
	for i, x := range run {
		rss[i], gor[i] = faultkit.MiB(x.rss), x.goroutines
	}
	for _, series := range []struct {
		name  string
		v     []float64
		limit func(first, last float64) bool
	}{
		{"RSS (MiB)", rss, func(first, last float64) bool { return last > first*1.3+10 }},
		{"goroutines", gor, func(first, last float64) bool { return last > first*1.25+20 }},
	} {
		n := len(series.v) / 3
		first, last := mean(series.v[:max(n, 1)]), mean(series.v[len(series.v)-max(n, 1):])
		slope := slopePerHour(run, series.v)
		t.Logf("soak: %s: first third %.1f, last third %.1f (%+.1f%%), trend %+.1f per hour, min %.1f, max %.1f",
			series.name, first, last, 100*(last/first-1), slope, slices.Min(series.v), slices.Max(series.v))
		if series.limit(first, last) {
			t.Errorf("soak: %s grew from %.1f to %.1f over the run: it must stay flat", series.name, first, last)
		}
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// slopePerHour fits v over the samples' times by least squares.
func slopePerHour(run []sample, v []float64) float64 {
	var sx, sy, sxx, sxy float64
	n := float64(len(v))
	for i, y := range v {
		x := run[i].at.Hours()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	den := n*sxx - sx*sx
	if den == 0 || math.IsNaN(den) {
		return 0
	}
	return (n*sxy - sx*sy) / den
}
