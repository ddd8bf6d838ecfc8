package main

import (
	"context"
	"fmt"
	"github.com/captf/captf/test/integration/framework"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// The fan-out fleet: one identity allowing every namespace, one cluster in
// each of -namespaces namespaces. Rotation and steady run on it too.
const (
	fleetIdentity = "bench-fanout"
	fleetSource   = "fanout"
	fleetCluster  = "cluster"
	baselineName  = "bench-baseline"
)

type fleet struct {
	namespaces []string
	mirror     string
	hash       string
	// uids of the clusters by namespace.
	uids map[string]types.UID
	// baseline are plain Secrets, one per namespace, for the baselines.
	baseline []*baselineSecret
}

// s4Args is the manager of fan-out and the S4 rotation: the identity
// resync is short, the workload resync long.
func (b *bench) s4Args() []string {
	return []string{"--sync-period=" + b.cfg.LongPeriod.String(), "--identity-resync=" + b.cfg.S4Resync.String()}
}

// fanout measures the time to mirror one identity into -namespaces
// namespaces (and builds the fleet the rotation and steady scenarios use).
func (b *bench) fanout(ctx context.Context) error {
	const sc = "fanout"
	report := b.cfg.has(sc)
	n := b.cfg.Namespaces
	f := &fleet{mirror: credentials.MirrorName(fleetIdentity), uids: map[string]types.UID{}}
	for i := range n {
		ns := fmt.Sprintf("fanout-%04d", i)
		f.namespaces = append(f.namespaces, ns)
		f.baseline = append(f.baseline, &baselineSecret{ns: ns, name: baselineName})
	}
	data := credentialData()
	f.hash = credentials.SourceHash(data)
	if err := b.createSource(ctx, fleetSource, data); err != nil {
		return err
	}
	if err := b.createIdentity(ctx, fleetIdentity, fleetSource, &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}); err != nil {
		return err
	}
	if err := b.createNamespaces(ctx, f.namespaces, nil); err != nil {
		return err
	}

	// The baseline runs while no manager competes for the API server.
	if b.e.mgr != nil {
		b.e.mgr.Terminate()
		b.e.mgr = nil
	}
	baseline, err := b.baselineCreate(ctx, f.baseline)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(b.log, "baseline: %d Secret creates at qps %g burst %d with %d workers in %s\n", n, b.cfg.QPS, b.cfg.Burst, b.cfg.Workers, baseline.Round(time.Millisecond))

	if err := b.managerRun(ctx, sc, "s4", b.s4Args()...); err != nil {
		return err
	}
	before, _, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}

	var mu sync.Mutex
	first := time.Now()
	err = parallel(ctx, n, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		ns := f.namespaces[i]
		c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleetCluster, Annotations: standalone()},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: fleetIdentity}}}
		out, err := b.e.captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		f.uids[ns] = out.UID
		mu.Unlock()
		return nil
	})
	last := time.Now()
	if err != nil {
		return fmt.Errorf("creating clusters: %w", err)
	}
	fmt.Fprintf(b.log, "created %d clusters in %s; waiting for every mirror\n", n, last.Sub(first).Round(time.Millisecond))

	done, err := waitFor(ctx, "fan-out", b.cfg.Timeout, 100*time.Millisecond, func() (bool, string) {
		return b.fleetConverged(f)
	})
	if err != nil {
		b.res.fail("fan-out: %v", err)
		return err
	}
	b.fleet = f
	after, idle, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	d := faultkit.Diff(before, after)
	for _, p := range b.verifyFleet(ctx, f) {
		b.res.fail("fan-out: %s", p)
	}
	if !report {
		return nil
	}
	fmt.Fprintf(b.log, "fan-out converged %s after the last cluster was created\n", done.Sub(last).Round(time.Millisecond))
	r := b.res
	r.add(sc, fmt.Sprintf("%d namespaces: last object created -> all mirrored, CredentialsMirrored=True", n), done.Sub(last).Seconds(), unitSeconds).vs(baseline.Seconds())
	r.add(sc, "first object created -> all mirrored", done.Sub(first).Seconds(), unitSeconds).vs(baseline.Seconds())
	r.add(sc, "last object created -> manager idle (follow-up work done)", idle.Sub(last).Seconds(), unitSeconds)
	r.add(sc, "creating the clusters (fast client)", last.Sub(first).Seconds(), unitSeconds)
	w := d.Writes()
	r.add(sc, "mirror writes (created+updated+deleted)", d.MirrorWrites(), unitCount).vs(float64(n))
	reads := d.Sum("captf_source_reads_total", nil)
	r.add(sc, "source reads", reads, unitCount)
	reqs := d.Sum("captf_api_requests_total", nil)
	r.add(sc, "manager API requests", reqs, unitCount).vs(float64(n))
	r.requests(sc, fmt.Sprintf("%d clusters in %d namespaces, creation to idle", n, n), d)
	if w["created"] != float64(n) || w["updated"] > 0 || w["conflict"] > 0 {
		r.note("fan-out: mirror writes %s for %d namespaces (one create per namespace expected)", faultkit.FormatCounts(w), n)
	}
	if reads > float64(n) {
		r.note("fan-out: %.0f source reads for %d objects sharing one identity (%.2f per object)", reads, n, reads/float64(n))
	}
	return nil
}

// fleetConverged checks the tracker's caches: every namespace's mirror
// carries the current hash and its cluster's owner reference, and every
// cluster reports CredentialsMirrored=True.
func (b *bench) fleetConverged(f *fleet) (bool, string) {
	var noMirror, stale, notMirrored int
	example := ""
	for _, ns := range f.namespaces {
		m := b.t.mirror(ns, f.mirror)
		switch {
		case m == nil:
			noMirror++
			if example == "" {
				example = "no mirror in " + ns
			}
		case m.Annotations[v1alpha1.AnnotationSourceHash] != f.hash || !credentials.HasOwnerReference(m.OwnerReferences, f.uids[ns]):
			stale++
		}
		if s := b.t.status(kindCluster, ns, fleetCluster); !mirrored(s) {
			notMirrored++
			if example == "" {
				example = ns + "/" + fleetCluster + ": " + describeStatus(s)
			}
		}
	}
	if noMirror+stale+notMirrored == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("%d namespaces without a mirror, %d mirrors stale or without their owner, %d clusters not CredentialsMirrored=True (e.g. %s)",
		noMirror, stale, notMirrored, example)
}

// verifyFleet checks the fleet from fresh LISTs: every namespace has
// exactly one mirror carrying the current hash and exactly its cluster as
// owner, and every cluster is CredentialsMirrored=True.
func (b *bench) verifyFleet(ctx context.Context, f *fleet) []string {
	mirrors, err := listMirrors(ctx, b.e.kube)
	if err != nil {
		return []string{"listing mirrors: " + err.Error()}
	}
	clusters, err := b.e.captf.InfrastructureV1alpha1().TerraformClusters("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing clusters: " + err.Error()}
	}
	status := map[string]*v1alpha1.WorkloadStatus{}
	for i := range clusters.Items {
		c := &clusters.Items[i]
		status[c.Namespace+"/"+c.Name] = &c.Status
	}
	var problems []string
	for _, ns := range f.namespaces {
		m := mirrors[ns+"/"+f.mirror]
		switch {
		case m == nil:
			problems = append(problems, "no mirror in "+ns)
		case m.Annotations[v1alpha1.AnnotationSourceHash] != f.hash:
			problems = append(problems, fmt.Sprintf("mirror %s/%s carries hash %.12s, want %.12s", ns, m.Name, m.Annotations[v1alpha1.AnnotationSourceHash], f.hash))
		case len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != f.uids[ns] || m.OwnerReferences[0].Kind != kindCluster:
			problems = append(problems, fmt.Sprintf("mirror %s/%s has owners %s, want exactly %s/%s", ns, m.Name, describeOwners(m.OwnerReferences), kindCluster, fleetCluster))
		}
		if s := status[ns+"/"+fleetCluster]; !mirrored(s) {
			problems = append(problems, fmt.Sprintf("%s/%s: %s", ns, fleetCluster, describeStatus(s)))
		}
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("... and %d more", len(problems)-10))
	}
	return problems
}

func describeOwners(refs []metav1.OwnerReference) string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s/%s(%.8s)", r.Kind, r.Name, r.UID))
	}
	sort.Strings(out)
	return fmt.Sprintf("%v", out)
}

// standalone is the annotation of the benchmark's workload objects: they
// run without Cluster API owners (SPEC K2).
func standalone() map[string]string { return framework.Standalone() }
