package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

const sharedLabel = "bench.captf.io/shared"

// sharedObj is one planned workload object of the shared scenario.
type sharedObj struct {
	kind, ns, name string
	// own is spec.identityRef ("" for a machine or pool that inherits).
	own string
	// defaults is a cluster's spec.defaults.identityRef.
	defaults string
	// cluster is a member's cluster (its cluster-name label).
	cluster string
	// want is the identity the object resolves to (SPEC I1, I2), computed
	// here from the plan, independently of the engine.
	want string
	uid  types.UID
}

// sharedPlan builds the objects: in each namespace, groups of five — a
// cluster (identityRef, and on every other group defaults.identityRef), a
// machine and a pool that inherit (defaults, else the cluster's own), and
// a machine and a pool with their own identityRef — spread over the
// identities so that every namespace uses several and shares each between
// several objects.
func sharedPlan(total, namespaces, identities int) (nss []string, ids []string, objs []*sharedObj) {
	for i := range identities {
		ids = append(ids, fmt.Sprintf("bench-shared-%d", i))
	}
	id := func(x int) string { return ids[x%identities] }
	for n := range namespaces {
		ns := fmt.Sprintf("shared-%03d", n)
		nss = append(nss, ns)
		k := total / namespaces
		if n < total%namespaces {
			k++
		}
		clusterID := map[string]string{}
		for j := range k {
			g := j / 5
			cl := fmt.Sprintf("c%d", g)
			o := &sharedObj{ns: ns}
			// The roles in an order that gives every kind from three objects
			// per namespace on: cluster, inheriting machine, own-identity
			// pool, inheriting pool, own-identity machine.
			switch [5]int{0, 1, 4, 3, 2}[j%5] {
			case 0:
				o.kind, o.name, o.own = kindCluster, cl, id(n*3+g*7)
				o.want = o.own
				if g%2 == 0 {
					o.defaults = id(n*3 + g*7 + 1)
					clusterID[cl] = o.defaults
				} else {
					clusterID[cl] = o.own
				}
			case 1:
				o.kind, o.name, o.cluster, o.want = kindMachine, fmt.Sprintf("m%d-a", g), cl, clusterID[cl]
			case 2:
				o.kind, o.name, o.own = kindMachine, fmt.Sprintf("m%d-b", g), id(n*5+g*11+2)
				o.cluster, o.want = cl, o.own
			case 3:
				o.kind, o.name, o.cluster, o.want = kindPool, fmt.Sprintf("p%d-a", g), cl, clusterID[cl]
			case 4:
				o.kind, o.name, o.own = kindPool, fmt.Sprintf("p%d-b", g), id(n*5+g*11+3)
				o.cluster, o.want = cl, o.own
			}
			objs = append(objs, o)
		}
	}
	return nss, ids, objs
}

// shared measures convergence of many objects sharing few identities in
// few namespaces, the write conflicts it costs, and that every mirror ends
// with exactly the owner references of its users.
func (b *bench) shared(ctx context.Context) error {
	const sc = "shared"
	if err := b.managerRun(ctx, sc, "default"); err != nil {
		return err
	}
	nss, ids, objs := sharedPlan(b.cfg.SharedObjects, b.cfg.SharedNamespaces, b.cfg.SharedIdentities)
	hashes := map[string]string{}
	for i, id := range ids {
		data := credentialData()
		hashes[id] = credentials.SourceHash(data)
		src := fmt.Sprintf("shared-%d", i)
		if err := b.createSource(ctx, src, data); err != nil {
			return err
		}
		// A mix of the three ways to allow namespaces (N1-N4).
		var allowed *v1alpha1.AllowedNamespaces
		switch {
		case i%3 == 0:
			allowed = &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}
		case i%3 == 2 && len(nss) <= 100:
			allowed = &v1alpha1.AllowedNamespaces{List: nss}
		default:
			allowed = &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{sharedLabel: "true"}}}
		}
		if err := b.createIdentity(ctx, id, src, allowed); err != nil {
			return err
		}
	}
	if err := b.createNamespaces(ctx, nss, map[string]string{sharedLabel: "true"}); err != nil {
		return err
	}
	// expected[ns][identity] are the users of each mirror.
	expected := map[string]map[string][]*sharedObj{}
	for _, o := range objs {
		if expected[o.ns] == nil {
			expected[o.ns] = map[string][]*sharedObj{}
		}
		expected[o.ns][o.want] = append(expected[o.ns][o.want], o)
	}
	var baselineItems []*baselineSecret
	for _, ns := range nss {
		for _, id := range ids {
			if len(expected[ns][id]) > 0 {
				baselineItems = append(baselineItems, &baselineSecret{ns: ns, name: baselineName + "-" + id})
			}
		}
	}
	mirrorCount := len(baselineItems)
	if _, _, err := b.e.waitIdle(ctx); err != nil {
		return err
	}
	baseline, contract, err := b.sharedBaselines(ctx, baselineItems, len(objs), nss)
	if err != nil {
		return err
	}

	before, _, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	byNS := map[string][]*sharedObj{}
	for _, o := range objs {
		byNS[o.ns] = append(byNS[o.ns], o)
	}
	first := time.Now()
	// One goroutine per namespace at a time: a cluster is created before
	// its members.
	err = parallel(ctx, len(nss), b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		for _, o := range byNS[nss[i]] {
			if err := b.createShared(ctx, o); err != nil {
				return err
			}
		}
		return nil
	})
	last := time.Now()
	if err != nil {
		return fmt.Errorf("creating objects: %w", err)
	}
	fmt.Fprintf(b.log, "created %d objects in %d namespaces in %s; waiting for %d mirrors\n", len(objs), len(nss), last.Sub(first).Round(time.Millisecond), mirrorCount)
	done, err := waitFor(ctx, "shared", b.cfg.Timeout, 200*time.Millisecond, func() (bool, string) {
		problems := b.checkShared(objs, nss, ids, expected, hashes, cacheView{b.t})
		if len(problems) == 0 {
			return true, ""
		}
		return false, fmt.Sprintf("%d problems: %s", len(problems), joinLimited(problems, 3))
	})
	if err != nil {
		b.res.fail("shared: %v", err)
		return err
	}
	after, idle, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	d := faultkit.Diff(before, after)
	// The final word comes from fresh LISTs, after the manager is idle.
	view, err := b.listView(ctx)
	if err != nil {
		return err
	}
	problems := b.checkShared(objs, nss, ids, expected, hashes, view)
	lost, extra := ownerDiff(nss, ids, expected, view)
	for i, p := range problems {
		if i == 10 {
			b.res.fail("shared: ... and %d more problems", len(problems)-10)
			break
		}
		b.res.fail("shared: %s", p)
	}

	c, m, p := 0, 0, 0
	for _, o := range objs {
		switch o.kind {
		case kindCluster:
			c++
		case kindMachine:
			m++
		case kindPool:
			p++
		}
	}
	fmt.Fprintf(b.log, "shared converged %s after the last object was created\n", done.Sub(last).Round(time.Millisecond))
	r := b.res
	w := d.Writes()
	r.add(sc, fmt.Sprintf("%d objects (%d clusters, %d machines, %d pools), %d namespaces, %d identities, %d mirrors: last object created -> converged",
		len(objs), c, m, p, len(nss), len(ids), mirrorCount), done.Sub(last).Seconds(), unitSeconds).vs(baseline.Seconds())
	r.add(sc, "last object created -> converged, vs a baseline that also writes once per object on a second client (the status writes convergence requires)",
		done.Sub(last).Seconds(), unitSeconds).vs(contract.Seconds())
	r.add(sc, "first object created -> converged", done.Sub(first).Seconds(), unitSeconds).vs(baseline.Seconds())
	r.add(sc, "last object created -> manager idle (follow-up work done)", idle.Sub(last).Seconds(), unitSeconds)
	r.add(sc, "creating the objects (fast client)", last.Sub(first).Seconds(), unitSeconds)
	// Conflicts include creates that lost the race to another reconcile of
	// the namespace (AlreadyExists) and updates refused for a stale
	// resourceVersion; both retry from a fresh read.
	r.add(sc, "write conflicts (captf_mirror_writes_total{result=conflict})", w["conflict"], unitCount)
	lostCreates := d.Requests()["create secrets"] - w["created"] - w["error"] - w["refused"]
	r.add(sc, "mirror creates answered AlreadyExists (create requests - created)", lostCreates, unitCount)
	r.add(sc, "mirror writes (created+updated+deleted)", d.MirrorWrites(), unitCount).vs(float64(mirrorCount))
	r.add(sc, "source reads", d.Sum("captf_source_reads_total", nil), unitCount)
	r.add(sc, "manager API requests", d.Sum("captf_api_requests_total", nil), unitCount).vs(float64(mirrorCount))
	r.add(sc, "owner references lost (expected, missing)", float64(lost), unitCount)
	r.add(sc, "owner references extra (present, not a user)", float64(extra), unitCount)
	r.requests(sc, fmt.Sprintf("%d objects, creation to idle", len(objs)), d)
	if w["created"] != float64(mirrorCount) || w["deleted"] > 0 {
		r.note("shared: mirror writes %s for %d mirrors", faultkit.FormatCounts(w), mirrorCount)
	}
	// The manager that converged the objects also holds what it wrote
	// (the status it last wrote per object): its footprint, beside the
	// restarted managers' below.
	return b.footprint(ctx, sc)
}

// sharedBaselines runs the shared scenario's two baselines, none with
// -no-baselines (zero durations: no ratio is reported).
func (b *bench) sharedBaselines(ctx context.Context, baselineItems []*baselineSecret, objects int, nss []string) (baseline, contract time.Duration, err error) {
	if b.cfg.NoBaselines {
		fmt.Fprintln(b.log, "baselines skipped (-no-baselines)")
		return 0, 0, nil
	}
	mirrorCount := len(baselineItems)
	// The manager is idle and does not see these Secrets (not mirrors).
	baseline, err = b.baselineCreate(ctx, baselineItems)
	if err != nil {
		return 0, 0, fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(b.log, "baseline: %d Secret creates in %s\n", mirrorCount, baseline.Round(time.Millisecond))
	// The contract baseline creates its own Secrets (other names): the
	// first baseline's stay as they are.
	contractItems := make([]*baselineSecret, len(baselineItems))
	for i, it := range baselineItems {
		contractItems[i] = &baselineSecret{ns: it.ns, name: it.name + "-c"}
	}
	contract, err = b.baselineContract(ctx, contractItems, objects, nss)
	if err != nil {
		return 0, 0, fmt.Errorf("contract baseline: %w", err)
	}
	fmt.Fprintf(b.log, "contract baseline: %d Secret creates and, on a second client, %d writes in %s\n", mirrorCount, objects, contract.Round(time.Millisecond))
	return baseline, contract, nil
}

// createShared creates one planned object and records its UID.
func (b *bench) createShared(ctx context.Context, o *sharedObj) error {
	api := b.e.captf.InfrastructureV1alpha1()
	meta := metav1.ObjectMeta{Namespace: o.ns, Name: o.name, Annotations: standalone()}
	if o.cluster != "" {
		meta.Labels = map[string]string{v1alpha1.LabelClusterName: o.cluster}
	}
	var own *v1alpha1.IdentityReference
	if o.own != "" {
		own = &v1alpha1.IdentityReference{Name: o.own}
	}
	var uid types.UID
	switch o.kind {
	case kindCluster:
		c := &v1alpha1.TerraformCluster{ObjectMeta: meta, Spec: v1alpha1.TerraformClusterSpec{IdentityRef: own}}
		if o.defaults != "" {
			c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: &v1alpha1.IdentityReference{Name: o.defaults}}
		}
		out, err := api.TerraformClusters(o.ns).Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		uid = out.UID
	case kindMachine:
		out, err := api.TerraformMachines(o.ns).Create(ctx, &v1alpha1.TerraformMachine{ObjectMeta: meta, Spec: v1alpha1.TerraformMachineSpec{IdentityRef: own}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		uid = out.UID
	case kindPool:
		out, err := api.TerraformMachinePools(o.ns).Create(ctx, &v1alpha1.TerraformMachinePool{ObjectMeta: meta, Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: own}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		uid = out.UID
	}
	o.uid = uid
	return nil
}

// view is where checkShared reads mirrors and statuses from.
type view interface {
	mirror(ns, name string) *corev1.Secret
	status(kind, ns, name string) *v1alpha1.WorkloadStatus
}

type cacheView struct{ t *tracker }

func (c cacheView) mirror(ns, name string) *corev1.Secret { return c.t.mirror(ns, name) }
func (c cacheView) status(kind, ns, name string) *v1alpha1.WorkloadStatus {
	return c.t.status(kind, ns, name)
}

// listView holds fresh LISTs from the API server.
type listView struct {
	mirrors  map[string]*corev1.Secret
	statuses map[string]*v1alpha1.WorkloadStatus // kind/ns/name
}

func (l listView) mirror(ns, name string) *corev1.Secret { return l.mirrors[ns+"/"+name] }
func (l listView) status(kind, ns, name string) *v1alpha1.WorkloadStatus {
	return l.statuses[kind+"/"+ns+"/"+name]
}

func (b *bench) listView(ctx context.Context) (listView, error) {
	v := listView{statuses: map[string]*v1alpha1.WorkloadStatus{}}
	var err error
	if v.mirrors, err = listMirrors(ctx, b.e.kube); err != nil {
		return v, err
	}
	api := b.e.captf.InfrastructureV1alpha1()
	clusters, err := api.TerraformClusters("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	for i := range clusters.Items {
		o := &clusters.Items[i]
		v.statuses[kindCluster+"/"+o.Namespace+"/"+o.Name] = &o.Status
	}
	machines, err := api.TerraformMachines("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	for i := range machines.Items {
		o := &machines.Items[i]
		v.statuses[kindMachine+"/"+o.Namespace+"/"+o.Name] = &o.Status
	}
	pools, err := api.TerraformMachinePools("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	for i := range pools.Items {
		o := &pools.Items[i]
		v.statuses[kindPool+"/"+o.Namespace+"/"+o.Name] = &o.Status
	}
	return v, nil
}

// checkShared lists what is not as it should be: an object not
// CredentialsMirrored=True or resolved to another identity; a mirror that
// is missing, stale, or whose owner references are not exactly its users
// (by UID); a mirror of an identity nobody in the namespace uses.
func (b *bench) checkShared(objs []*sharedObj, nss, ids []string, expected map[string]map[string][]*sharedObj, hashes map[string]string, v view) []string {
	var problems []string
	for _, o := range objs {
		s := v.status(o.kind, o.ns, o.name)
		switch {
		case !mirrored(s):
			problems = append(problems, fmt.Sprintf("%s %s/%s: %s", o.kind, o.ns, o.name, describeStatus(s)))
		case s.Identity != o.want:
			problems = append(problems, fmt.Sprintf("%s %s/%s resolved to identity %q, want %q", o.kind, o.ns, o.name, s.Identity, o.want))
		}
	}
	for _, ns := range nss {
		for _, id := range ids {
			users := expected[ns][id]
			m := v.mirror(ns, credentials.MirrorName(id))
			switch {
			case len(users) == 0 && m != nil:
				problems = append(problems, fmt.Sprintf("mirror %s/%s exists but nothing in the namespace uses %s (owners %s)", ns, m.Name, id, describeOwners(m.OwnerReferences)))
			case len(users) == 0:
			case m == nil:
				problems = append(problems, fmt.Sprintf("no mirror of %s in %s (%d users)", id, ns, len(users)))
			case m.Annotations[v1alpha1.AnnotationSourceHash] != hashes[id]:
				problems = append(problems, fmt.Sprintf("mirror %s/%s carries a stale hash", ns, m.Name))
			default:
				if want, got := uidSet(users), refUIDs(m.OwnerReferences); !sameUIDs(want, got) {
					problems = append(problems, fmt.Sprintf("mirror %s/%s has %d owner references, want exactly its %d users: %s",
						ns, m.Name, len(m.OwnerReferences), len(users), describeOwners(m.OwnerReferences)))
				}
			}
		}
	}
	return problems
}

// ownerDiff counts expected owner references that are missing (lost) and
// present ones that are not users (extra), over every expected mirror.
func ownerDiff(nss, ids []string, expected map[string]map[string][]*sharedObj, v view) (lost, extra int) {
	for _, ns := range nss {
		for _, id := range ids {
			users := expected[ns][id]
			if len(users) == 0 {
				continue
			}
			want := uidSet(users)
			var got []types.UID
			if m := v.mirror(ns, credentials.MirrorName(id)); m != nil {
				got = refUIDs(m.OwnerReferences)
			}
			have := map[types.UID]bool{}
			for _, u := range got {
				have[u] = true
				if !want[u] {
					extra++
				}
			}
			for u := range want {
				if !have[u] {
					lost++
				}
			}
		}
	}
	return lost, extra
}

func uidSet(users []*sharedObj) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, u := range users {
		out[u.uid] = true
	}
	return out
}

func refUIDs(refs []metav1.OwnerReference) []types.UID {
	out := make([]types.UID, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.UID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sameUIDs: got holds each wanted UID exactly once and nothing else.
func sameUIDs(want map[types.UID]bool, got []types.UID) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[types.UID]bool{}
	for _, u := range got {
		if !want[u] || seen[u] {
			return false
		}
		seen[u] = true
	}
	return true
}
