package faultscp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// secretValue is in every source Secret of the package; the X1 test at the
// end scans for it (and for every source hash used).
const secretValue = "faults-Cr3dential-VALUE-5e1b07"

// full is set by CAPTF_FAULTS_FULL=1 (make test-faults).
var full = os.Getenv("CAPTF_FAULTS_FULL") == "1"

// size picks the short (make test) or the full (make test-faults) size.
func size(short, fullSize int) int {
	if full {
		return fullSize
	}
	return short
}

// usedHashes are the source hashes of the package, for the X1 scan.
var usedHashes struct {
	sync.Mutex
	list []string
}

// sourceData is the n-th version of the source data (a rotation bumps n).
func sourceData(n int) map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     fmt.Sprintf("AKIAFAULTS%04d", n),
		"AWS_SECRET_ACCESS_KEY": fmt.Sprintf("%s-%d", secretValue, n),
	}
}

// hashOf is the source hash of data (M4), remembered for the X1 scan.
func hashOf(data map[string]string) string {
	h := framework.HashOf(data)
	usedHashes.Lock()
	usedHashes.list = append(usedHashes.list, h)
	usedHashes.Unlock()
	return h
}

// startManager starts a manager as the manager's ServiceAccount user, its
// log kept for the X1 scan.
func startManager(t *testing.T, e *framework.Env, args ...string) *framework.Manager {
	t.Helper()
	return e.StartManagerKeepLog(t, framework.ManagerOptions{User: controlplane.Manager, Args: args})
}

// preserveLogs copies, when the test fails (or CAPTF_FAULTS_KEEP_LOGS is
// set), every manager log of the package and the control plane's logs out
// of the control plane's directory (which is removed at the end) and says
// where.
func preserveLogs(t *testing.T, e *framework.Env) {
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("CAPTF_FAULTS_KEEP_LOGS") == "" {
			return
		}
		dir, err := os.MkdirTemp("", "captf-faults-"+t.Name()+"-")
		if err != nil {
			t.Logf("keeping logs: %v", err)
			return
		}
		copyFile := func(from, to string) {
			if b, err := os.ReadFile(from); err == nil {
				_ = os.WriteFile(to, b, 0o600)
			}
		}
		for i, m := range framework.KeptManagers() {
			copyFile(m.LogPath, fmt.Sprintf("%s/manager-%03d.log", dir, i))
		}
		for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
			copyFile(e.CP.LogPath(c), dir+"/"+c+".log")
		}
		t.Logf("logs kept in %s", dir)
	})
}

// fixture wraps a test's manager in a framework.Fixture.
func fixture(t *testing.T, e *framework.Env, m *framework.Manager) *framework.Fixture {
	return &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: 3 * time.Minute}
}

// requireAlive fails the test at once when the manager has exited.
func requireAlive(t *testing.T, m *framework.Manager, when string) {
	t.Helper()
	if exited, err := m.ExitError(); exited {
		t.Fatalf("the manager exited %s (%v); end of its log:\n%s", when, err, lastLines(m.Log(), 40))
	}
}

// requireControlPlane fails the test when a control plane process died on
// its own (the later tests need the garbage collector).
func requireControlPlane(t *testing.T, e *framework.Env) {
	t.Helper()
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if !e.CP.Running(c) {
			b, _ := os.ReadFile(e.CP.LogPath(c))
			t.Fatalf("%s is no longer running; end of its log:\n%s", c, lastLines(string(b), 30))
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// createNamespaces creates n namespaces named prefix-xxxxxx-i with labels,
// deleted when the test ends.
func createNamespaces(t *testing.T, e *framework.Env, prefix string, n int, labels map[string]string) []string {
	t.Helper()
	ctx := framework.Context(t)
	base := framework.Name(prefix)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", base, i)
	}
	t.Cleanup(func() {
		_ = framework.Parallel(len(names), 8, func(i int) error {
			err := e.Kube.CoreV1().Namespaces().Delete(context.Background(), names[i], metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting namespace %s: %v", names[i], err)
			}
			return nil
		})
	})
	err := framework.Parallel(n, 8, func(i int) error {
		_, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating namespaces: %v", err)
	}
	return names
}

// createIdentity creates identity name (cleanUp deletes it).
func createIdentity(t *testing.T, e *framework.Env, name string, ref v1alpha1.SecretReference, allowed *v1alpha1.AllowedNamespaces) {
	t.Helper()
	ids := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	id := &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: allowed}}
	if _, err := ids.Create(framework.Context(t), id, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cleanUp registers the test's clean-up: stop its managers (SIGTERM), then
// delete what is left in its namespaces without destroying it, then its
// identity. Without it a later test's manager would find objects with
// apply Jobs whose identity is gone, keep their finalizers (J8, V2) and
// hold their namespaces terminating. The arguments are read when the test
// ends.
func cleanUp(t *testing.T, e *framework.Env, managers *[]*framework.Manager, namespaces *[]string, identity string) {
	t.Cleanup(func() {
		// X1 while the test's objects and events still exist: the final
		// TestX1NoSecretValueAnywhere scans the logs, and what is left.
		scanForSecretValues(t, e, *namespaces)
		for _, m := range *managers {
			if m != nil {
				m.Stop(t)
			}
		}
		if err := e.DeleteWorkloads(context.Background(), *namespaces); err != nil {
			t.Logf("clean-up: %v", err)
		}
		err := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(context.Background(), identity, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("clean-up: deleting identity %s: %v", identity, err)
		}
	})
}

// selectorOf allows the namespaces carrying labels.
func selectorOf(labels map[string]string) *v1alpha1.AllowedNamespaces {
	return &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: labels}}
}

// object is a workload object of a test.
type object struct {
	Kind, Namespace, Name string
	UID                   types.UID
}

func (o object) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

const image = "example.com/module:1"

// createCluster creates a TerraformCluster using identity.
func createCluster(ctx context.Context, e *framework.Env, ns, name, identity string) (object, error) {
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identity}, Source: v1alpha1.SourceSpec{Image: image}}}
	c, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return object{}, err
	}
	return object{Kind: "TerraformCluster", Namespace: ns, Name: name, UID: c.UID}, nil
}

// createClusters creates, in parallel, a cluster c0 in every namespace
// of nss and a second one, c1, in every fourth, all with identity.
func createClusters(t *testing.T, e *framework.Env, nss []string, identity string) []object {
	t.Helper()
	ctx := framework.Context(t)
	type spec struct{ ns, name string }
	var specs []spec
	for i, ns := range nss {
		specs = append(specs, spec{ns, "c0"})
		if i%4 == 0 {
			specs = append(specs, spec{ns, "c1"})
		}
	}
	objs := make([]object, len(specs))
	if err := framework.Parallel(len(specs), 8, func(i int) error {
		var err error
		objs[i], err = createCluster(ctx, e, specs[i].ns, specs[i].name, identity)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return objs
}

// createMachine creates a TerraformMachine with its own identityRef (I2).
func createMachine(ctx context.Context, e *framework.Env, ns, name, identity string) (object, error) {
	m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformMachineSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identity}, Source: v1alpha1.SourceSpec{Image: image}}}
	m, err := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, m, metav1.CreateOptions{})
	if err != nil {
		return object{}, err
	}
	return object{Kind: "TerraformMachine", Namespace: ns, Name: name, UID: m.UID}, nil
}

// deleteObject deletes a workload object (its finalizer then runs the
// deletion flow).
func deleteObject(ctx context.Context, e *framework.Env, o object) error {
	api := e.Captf.InfrastructureV1alpha1()
	var err error
	switch o.Kind {
	case "TerraformCluster":
		err = api.TerraformClusters(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
	case "TerraformMachine":
		err = api.TerraformMachines(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
	default:
		err = fmt.Errorf("unknown kind %s", o.Kind)
	}
	return err
}

// liveObject is a workload object as a snapshot saw it.
type liveObject struct {
	object
	Deleting   bool
	Finalizer  bool
	Generation int64
	Identity   string
	Conditions []metav1.Condition
}

// snapshot is what the API server holds for a test: the identity's mirrors
// by namespace and the workload objects by UID, from three LISTs.
type snapshot struct {
	mirrors map[string]*corev1.Secret
	objects map[types.UID]liveObject
}

// takeSnapshot lists the mirrors of identity and the clusters and machines
// of namespaces.
func takeSnapshot(ctx context.Context, e *framework.Env, identity string, namespaces []string) (*snapshot, error) {
	in := map[string]bool{}
	for _, ns := range namespaces {
		in[ns] = true
	}
	s := &snapshot{mirrors: map[string]*corev1.Secret{}, objects: map[types.UID]liveObject{}}
	secrets, err := e.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue})
	if err != nil {
		return nil, err
	}
	name := credentials.MirrorName(identity)
	for i := range secrets.Items {
		m := &secrets.Items[i]
		if in[m.Namespace] && m.Name == name {
			s.mirrors[m.Namespace] = m
		}
	}
	api := e.Captf.InfrastructureV1alpha1()
	clusters, err := api.TerraformClusters("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, c := range clusters.Items {
		if !in[c.Namespace] {
			continue
		}
		s.objects[c.UID] = liveObject{object: object{Kind: "TerraformCluster", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			Deleting: c.DeletionTimestamp != nil, Finalizer: framework.HasFinalizer(c.Finalizers), Generation: c.Generation,
			Identity: credentials.ClusterIdentity(&c), Conditions: c.Status.Conditions}
	}
	machines, err := api.TerraformMachines("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, m := range machines.Items {
		if !in[m.Namespace] {
			continue
		}
		id := ""
		if m.Spec.IdentityRef != nil {
			id = m.Spec.IdentityRef.Name
		}
		s.objects[m.UID] = liveObject{object: object{Kind: "TerraformMachine", Namespace: m.Namespace, Name: m.Name, UID: m.UID},
			Deleting: m.DeletionTimestamp != nil, Finalizer: framework.HasFinalizer(m.Finalizers), Generation: m.Generation,
			Identity: id, Conditions: m.Status.Conditions}
	}
	return s, nil
}

// problems collects up to a few messages and counts the rest.
type problems struct {
	n    int
	msgs []string
}

func (p *problems) addf(format string, args ...any) {
	p.n++
	if len(p.msgs) < 6 {
		p.msgs = append(p.msgs, fmt.Sprintf(format, args...))
	}
}

func (p *problems) String() string {
	if p.n == 0 {
		return "none"
	}
	return fmt.Sprintf("%d problems: %s", p.n, strings.Join(p.msgs, "; "))
}

// mirrorsConverged checks, for every namespace, that the identity's mirror
// carries hash and exactly the owner references of the non-deleting
// objects there that use the identity (M5), or that no mirror exists where
// no object uses it.
func (s *snapshot) mirrorsConverged(identity, hash string, namespaces []string) (bool, string) {
	users := map[string]map[types.UID]bool{}
	for _, o := range s.objects {
		if o.Deleting || o.Identity != identity {
			continue
		}
		if users[o.Namespace] == nil {
			users[o.Namespace] = map[types.UID]bool{}
		}
		users[o.Namespace][o.UID] = true
	}
	var p problems
	current := 0
	for _, ns := range namespaces {
		m := s.mirrors[ns]
		want := users[ns]
		if len(want) == 0 {
			if m != nil {
				p.addf("%s: a mirror without users (owners %v)", ns, framework.OwnerNames(m))
			}
			continue
		}
		if m == nil {
			// Say why, as the users' CredentialsMirrored says it.
			why := ""
			for uid := range want {
				for _, c := range s.objects[uid].Conditions {
					if c.Type == string(v1alpha1.ConditionCredentialsMirrored) || (c.Type == string(v1alpha1.ConditionIdentityAllowed) && c.Status != metav1.ConditionTrue) {
						why += fmt.Sprintf(" (%s %s/%s: %s)", c.Type, c.Status, c.Reason, c.Message)
					}
				}
				break
			}
			p.addf("%s: no mirror%s", ns, why)
			continue
		}
		if m.Annotations[v1alpha1.AnnotationSourceHash] != hash {
			p.addf("%s: the mirror carries another source hash than the current one", ns)
			continue
		}
		got := map[types.UID]bool{}
		for _, r := range m.OwnerReferences {
			got[r.UID] = true
		}
		ok := len(got) == len(want) && len(got) == len(m.OwnerReferences)
		for uid := range want {
			if !got[uid] {
				ok = false
				p.addf("%s: mirror lacks the owner reference of %s", ns, s.objects[uid])
			}
		}
		if !ok {
			p.addf("%s: mirror owners %v, want %d users", ns, framework.OwnerNames(m), len(want))
			continue
		}
		current++
	}
	return p.n == 0, fmt.Sprintf("%d/%d mirrors current; %s", current, len(users), p.String())
}

// credentialsReported checks that every non-deleting object using the
// identity reports IdentityAllowed and CredentialsMirrored True.
func (s *snapshot) credentialsReported(identity string) (bool, string) {
	var p problems
	for _, o := range s.objects {
		if o.Deleting || o.Identity != identity {
			continue
		}
		for _, t := range []v1alpha1.ConditionType{v1alpha1.ConditionIdentityAllowed, v1alpha1.ConditionCredentialsMirrored} {
			if c := meta.FindStatusCondition(o.Conditions, string(t)); c == nil || c.Status != metav1.ConditionTrue {
				p.addf("%s: %s", o, framework.Describe(o.Conditions))
				break
			}
		}
	}
	return p.n == 0, p.String()
}

// statusDeadline bounds how long objects may take to report current
// credentials once their mirrors are: the workqueue's per-item backoff,
// which grows while the API is unreachable, is capped at 5 minutes
// (pkg/controllers/loop), so every failed item has been retried by then.
const statusDeadline = 6 * time.Minute

// waitConverged waits until every mirror carries hash and exactly its
// users' owner references and every object has its apply Job; then until
// every user reports IdentityAllowed and CredentialsMirrored True. It
// returns how long both took. Objects whose status lags their mirror are
// logged; a status that never catches up fails the test as the stale
// status bug (see the package's report).
func waitConverged(t *testing.T, e *framework.Env, m *framework.Manager, rec *framework.JobRecorder, identity, hash string, nss []string, objs []object) time.Duration {
	t.Helper()
	start := time.Now()
	slow := false
	waitSnapshot(t, e, identity, nss, time.Duration(size(3, 6))*time.Minute, "convergence", func(s *snapshot) (bool, string) {
		if exited, err := m.ExitError(); exited {
			return true, fmt.Sprintf("the manager exited: %v", err) // reported by requireAlive below
		}
		ok, msg := s.mirrorsConverged(identity, hash, nss)
		if ok {
			ok, msg = everyObjectHasApply(rec, objs)
		}
		if !ok && !slow && time.Since(start) > 30*time.Second {
			t.Logf("slow convergence, still waiting after %s: %s", time.Since(start).Round(time.Second), msg)
			slow = true
		}
		return ok, msg
	})
	requireAlive(t, m, "before the mirrors converged")
	mirrorsTook := time.Since(start)
	ctx := framework.Context(t)
	logged := false
	for {
		s, err := takeSnapshot(ctx, e, identity, nss)
		if err == nil {
			ok, msg := s.credentialsReported(identity)
			if ok {
				break
			}
			waited := time.Since(start) - mirrorsTook
			if !logged && waited > 20*time.Second {
				t.Logf("status lags the mirrors by %s: %s", waited.Round(time.Second), msg)
				logged = true
			}
			if waited > statusDeadline {
				requireAlive(t, m, "while the status lagged")
				// Regression guard: this fault once left a stale
				// IdentityCheckFailed in place, because the status was
				// compared only with an informer copy that lacked the
				// manager's own last write (fixed: loop.Written).
				t.Fatalf("stale status: the mirrors converged %s ago, but objects still report outdated conditions: %s",
					waited.Round(time.Second), msg)
			}
		}
		time.Sleep(time.Second)
	}
	took := time.Since(start).Round(time.Millisecond)
	if took-mirrorsTook > 5*time.Second {
		t.Logf("mirrors converged in %s, status in %s", mirrorsTook.Round(time.Millisecond), took)
	}
	return took
}

// conditionAll reports whether every non-deleting object has condition t
// with status and reason.
func (s *snapshot) conditionAll(t v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) (bool, string) {
	var p problems
	for _, o := range s.objects {
		if o.Deleting {
			continue
		}
		c := meta.FindStatusCondition(o.Conditions, string(t))
		if c == nil || c.Status != status || c.Reason != string(reason) {
			p.addf("%s: %s", o, framework.Describe(o.Conditions))
		}
	}
	return p.n == 0, p.String()
}

// everyObjectHasApply reports whether the recorder saw an apply Job for
// every object.
func everyObjectHasApply(rec *framework.JobRecorder, objs []object) (bool, string) {
	missing := 0
	for _, o := range objs {
		if len(rec.Of(o.UID, v1alpha1.JobActionApply)) == 0 {
			missing++
		}
	}
	return missing == 0, fmt.Sprintf("%d of %d objects have no apply Job yet", missing, len(objs))
}

// requireOneJobEach checks "no Job was created twice": every Job the
// recorder ever saw for objs, grouped by owner UID, action and generation,
// is alone; every object has exactly one apply Job (its generation never
// changes in these tests), and exactly wantDestroy[uid] destroy Jobs. A
// fresh LIST agrees with the record for the Jobs that still exist.
func requireOneJobEach(t *testing.T, e *framework.Env, rec *framework.JobRecorder, objs []object, wantDestroy map[types.UID]int) {
	t.Helper()
	owners := map[types.UID]bool{}
	byUID := map[types.UID]object{}
	for _, o := range objs {
		owners[o.UID] = true
		byUID[o.UID] = o
	}
	groups := map[string][]framework.JobRecord{}
	for _, j := range rec.Jobs(owners) {
		k := fmt.Sprintf("%s/%s/%s", j.Owner, j.Action, j.Generation)
		groups[k] = append(groups[k], j)
	}
	for _, js := range groups {
		if len(js) > 1 {
			var names []string
			for _, j := range js {
				names = append(names, j.String()+" uid "+string(j.UID))
			}
			t.Errorf("a Job was created twice for %s: %s", byUID[js[0].Owner], strings.Join(names, ", "))
		}
	}
	for _, o := range objs {
		if n := len(rec.Of(o.UID, v1alpha1.JobActionApply)); n != 1 {
			t.Errorf("%s: %d apply Jobs were created, want exactly 1", o, n)
		}
		if n, want := len(rec.Of(o.UID, v1alpha1.JobActionDestroy)), wantDestroy[o.UID]; n != want {
			t.Errorf("%s: %d destroy Jobs were created, want exactly %d", o, n, want)
		}
	}
	// Cross-check with the API server: every Job of these owners that
	// still exists was recorded.
	list, err := e.Kube.BatchV1().Jobs("").List(framework.Context(t), metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[types.UID]bool{}
	for _, j := range rec.Jobs(owners) {
		recorded[j.UID] = true
	}
	for _, j := range list.Items {
		if c := metav1.GetControllerOf(&j); c != nil && owners[c.UID] && !recorded[j.UID] {
			t.Errorf("Job %s/%s exists but the recorder never saw it", j.Namespace, j.Name)
		}
	}
}

// finishApplyJobs sets every recorded apply Job of objs succeeded.
func finishApplyJobs(t *testing.T, e *framework.Env, rec *framework.JobRecorder, objs []object) {
	t.Helper()
	ctx := framework.Context(t)
	var js []framework.JobRecord
	for _, o := range objs {
		js = append(js, rec.Of(o.UID, v1alpha1.JobActionApply)...)
	}
	if err := framework.Parallel(len(js), 8, func(i int) error {
		return e.FinishJob(ctx, js[i].Namespace, js[i].Name, "")
	}); err != nil {
		t.Fatalf("finishing apply Jobs: %v", err)
	}
}

// writesReport formats the manager's write requests (create, update,
// patch, delete) by resource and per object, from its own counters.
func writesReport(m *framework.Manager, objects int) string {
	met, err := m.Scrape()
	if err != nil {
		return "metrics unavailable: " + err.Error()
	}
	byResource := map[string]float64{}
	total, nonEvent := 0.0, 0.0
	for _, s := range met {
		if s.Name != "captf_api_requests_total" {
			continue
		}
		switch s.Labels["verb"] {
		case "create", "update", "patch", "delete":
			byResource[s.Labels["verb"]+" "+s.Labels["resource"]] += s.Value
			total += s.Value
			if s.Labels["resource"] != "events" {
				nonEvent += s.Value
			}
		}
	}
	var parts []string
	for _, k := range sortedKeys(byResource) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, byResource[k]))
	}
	writes := met.Writes()
	conflicts, errs := writes["conflict"], writes["error"]
	reads := met.Sum("captf_source_reads_total", nil)
	return fmt.Sprintf("%d objects: %.1f API writes per object without events (%.0f in all: %s); mirror write conflicts %.0f, errors %.0f; source reads %.0f",
		objects, nonEvent/float64(objects), total, strings.Join(parts, ", "), conflicts, errs, reads)
}

// logMark is a position in a manager's log.
type logMark int

// mark returns the log's current end.
func mark(m *framework.Manager) logMark { return logMark(len(m.Log())) }

var klogLine = regexp.MustCompile(`^([IWEF])\d{4} [0-9:.]+\s+\d+ [^\]]+\] (?:"((?:[^"\\]|\\.)*)"|(.*))`)

// logSummary counts the manager's log lines since from by severity and
// message (the first 70 characters of unstructured ones), most frequent
// first: what an operator reading the log during the fault sees.
func logSummary(m *framework.Manager, from logMark) string {
	text := m.Log()
	if int(from) < len(text) {
		text = text[from:]
	} else {
		text = ""
	}
	counts := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		x := klogLine.FindStringSubmatch(line)
		if x == nil {
			continue
		}
		msg := x[2]
		if msg == "" {
			msg = x[3]
		}
		if len(msg) > 70 {
			msg = msg[:70] + "..."
		}
		counts[x[1]+" "+msg]++
	}
	keys := sortedKeys(counts)
	sort.SliceStable(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var parts []string
	for i, k := range keys {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("... %d more kinds", len(keys)-8))
			break
		}
		parts = append(parts, fmt.Sprintf("%dx %q", counts[k], k))
	}
	if len(parts) == 0 {
		return "no log lines"
	}
	return strings.Join(parts, "; ")
}

// mirrorTracker follows the identity's mirrors through a watch, so a fault
// can be injected the moment a given share of them carries a hash.
type mirrorTracker struct {
	mu     sync.Mutex
	hashes map[string]string // namespace -> hash
}

func trackMirrors(t *testing.T, e *framework.Env, identity string) *mirrorTracker {
	t.Helper()
	mt := &mirrorTracker{hashes: map[string]string{}}
	name := credentials.MirrorName(identity)
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(e.Kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue
	}))
	inf := factory.Core().V1().Secrets().Informer()
	set := func(obj interface{}) {
		if s, ok := obj.(*corev1.Secret); ok && s.Name == name {
			mt.mu.Lock()
			mt.hashes[s.Namespace] = s.Annotations[v1alpha1.AnnotationSourceHash]
			mt.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, n interface{}) { set(n) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok && s.Name == name {
				mt.mu.Lock()
				delete(mt.hashes, s.Namespace)
				mt.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.WaitForCacheSync(stop)
	return mt
}

// count returns how many mirrors carry hash.
func (mt *mirrorTracker) count(hash string) int {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	n := 0
	for _, h := range mt.hashes {
		if h == hash {
			n++
		}
	}
	return n
}

// waitCount polls (every 10ms) until at least n mirrors carry hash.
func (mt *mirrorTracker) waitCount(t *testing.T, hash string, n int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if c := mt.count(hash); c >= n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d mirrors carry the expected source hash after %s, want %d", mt.count(hash), timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitSnapshot polls snapshots (every second) until ok holds, failing after
// timeout with the last message; it returns the time it took.
func waitSnapshot(t *testing.T, e *framework.Env, identity string, namespaces []string, timeout time.Duration, what string, ok func(*snapshot) (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := framework.Context(t)
	framework.Eventually(t, timeout, func() (bool, string) {
		s, err := takeSnapshot(ctx, e, identity, namespaces)
		if err != nil {
			return false, what + ": " + err.Error()
		}
		good, msg := ok(s)
		return good, what + ": " + msg
	})
	return time.Since(start)
}

var identityRE = regexp.MustCompile(`Acquired leadership[^\n]*identity="([^"]+)"`)

// leaderIdentity returns the Lease identity a manager's log says it
// acquired with, or "".
func leaderIdentity(m *framework.Manager) string {
	if x := identityRE.FindStringSubmatch(m.Log()); x != nil {
		return x[1]
	}
	return ""
}

// sortedKeys returns a map's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jobsStillThere counts the captf Jobs in namespaces.
func jobsStillThere(ctx context.Context, e *framework.Env, namespaces []string) (int, error) {
	n := 0
	for _, ns := range namespaces {
		l, err := e.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
		if err != nil {
			return 0, err
		}
		n += len(l.Items)
	}
	return n, nil
}

// x1Scanned counts what scanForSecretValues looked at, for the final report.
var x1Scanned struct {
	sync.Mutex
	events, statuses int
}

// forbiddenValues are the strings no event, status or log may contain
// (SPEC X1): the credential value and every source hash used so far.
func forbiddenValues() []string {
	usedHashes.Lock()
	defer usedHashes.Unlock()
	return append([]string{secretValue}, usedHashes.list...)
}

// scanForSecretValues checks the events of namespaces and the status of
// every captf object for the credential value and the source hashes
// (SPEC X1), but for the source hash T7 records by name in a workload's
// lastApply and lastDestroy (framework.WithoutRunHashes).
func scanForSecretValues(t *testing.T, e *framework.Env, namespaces []string) {
	t.Helper()
	ctx := context.Background()
	forbidden := forbiddenValues()
	check := func(what, text string) {
		for _, f := range forbidden {
			if strings.Contains(text, f) {
				t.Errorf("X1: %s contains a secret value or source hash", what)
			}
		}
	}
	events := 0
	for _, ns := range namespaces {
		l, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("X1 scan: %v", err)
			return
		}
		for _, ev := range l.Items {
			check("event "+ev.Namespace+"/"+ev.Name+" ("+ev.Reason+")", ev.Reason+" "+ev.Message)
		}
		events += len(l.Items)
	}
	api := e.Captf.InfrastructureV1alpha1()
	var statuses []any
	ids, err1 := api.TerraformClusterIdentities().List(ctx, metav1.ListOptions{})
	clusters, err2 := api.TerraformClusters("").List(ctx, metav1.ListOptions{})
	machines, err3 := api.TerraformMachines("").List(ctx, metav1.ListOptions{})
	pools, err4 := api.TerraformMachinePools("").List(ctx, metav1.ListOptions{})
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			t.Errorf("X1 scan: %v", err)
			return
		}
	}
	for _, x := range ids.Items {
		statuses = append(statuses, x.Status)
	}
	for _, x := range clusters.Items {
		statuses = append(statuses, framework.WithoutRunHashes(x.Status))
	}
	for _, x := range machines.Items {
		statuses = append(statuses, framework.WithoutRunHashes(x.Status))
	}
	for _, x := range pools.Items {
		statuses = append(statuses, framework.WithoutRunHashes(x.Status))
	}
	b, _ := json.Marshal(statuses)
	check("a status or condition of a captf object", string(b))
	x1Scanned.Lock()
	x1Scanned.events += events
	x1Scanned.statuses += len(statuses)
	x1Scanned.Unlock()
}
