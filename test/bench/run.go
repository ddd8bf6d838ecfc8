package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// credsNamespace holds every identity's source Secret.
const credsNamespace = "bench-creds"

// bench is one run.
type bench struct {
	cfg *Config
	e   *env
	t   *tracker
	res *results
	log io.Writer
	// fleet is the fan-out's objects, once created.
	fleet *fleet
}

// run runs the selected scenarios and returns their results. An error
// means the run could not go on (the results so far are returned too).
func run(ctx context.Context, cfg *Config, log io.Writer) (res *results, err error) {
	start := time.Now()
	if cfg.Root == "" {
		if cfg.Root, err = framework.RepoRoot(); err != nil {
			return nil, fmt.Errorf("%w; use -root", err)
		}
	}
	res = &results{Started: start, Environment: environment(cfg), Config: configMap(cfg)}
	defer func() { res.Duration = time.Since(start).Round(time.Second).String() }()
	e, err := startEnv(ctx, cfg, log)
	if err != nil {
		return res, err
	}
	defer func() {
		keep := cfg.Keep || err != nil || len(res.Failures) > 0
		if keep {
			fmt.Fprintf(log, "keeping the work directory %s (control plane and manager logs)\n", e.dir)
		}
		e.stop(keep)
	}()
	t, err := startTracker(ctx, e)
	if err != nil {
		return res, err
	}
	b := &bench{cfg: cfg, e: e, t: t, res: res, log: log}
	if err := b.createNamespaces(ctx, []string{credsNamespace}, nil); err != nil {
		return res, err
	}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"fanout", b.fanout},
		{"rotation", func(ctx context.Context) error {
			for _, path := range rotationPaths {
				if err := b.rotation(ctx, path); err != nil {
					return err
				}
			}
			return nil
		}},
		{"memory", b.memory},
		{"shared", b.shared},
		{"steady", b.steady},
		{"restart", b.restart},
		{"s4pass", b.identityPass},
		{"jobs", b.jobs},
		{"capi", b.capi},
		{"drift", b.drift},
	}
	for _, s := range steps {
		// Rotation and steady run on the fan-out's fleet: build it (without
		// reporting it) when only they are selected.
		needed := cfg.has(s.name) || (s.name == "fanout" && (cfg.has("rotation") || cfg.has("steady")))
		if !needed {
			continue
		}
		fmt.Fprintf(log, "=== %s (%s since start)\n", s.name, time.Since(start).Round(time.Second))
		if err := s.fn(ctx); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return res, nil
}

// managerRun starts the manager named name with args unless it is the
// one running, waits until it is idle, and checks that a start over
// converged objects wrote no mirror (M6: an unchanged pass makes no write).
func (b *bench) managerRun(ctx context.Context, scenario, name string, args ...string) error {
	if b.e.mgr != nil && b.e.mgr.name == name && !b.e.mgr.Exited() {
		return nil
	}
	c, m, p := b.t.objects()
	objects := c + m + p
	started := time.Now()
	if _, err := b.e.startManager(ctx, name, args...); err != nil {
		return err
	}
	idle, last, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	if objects == 0 {
		return nil
	}
	fmt.Fprintf(b.log, "manager %q: start-up pass over %d objects done %s after start\n", name, objects, last.Sub(started).Round(time.Millisecond))
	b.res.requests(scenario, fmt.Sprintf("start-up pass of manager %q over %d converged objects", name, objects), idle)
	if w := idle.MirrorWrites(); w > 0 {
		b.res.fail("%s: manager %q rewrote mirrors on start-up over converged objects (%s); M6 says an unchanged pass makes no write",
			scenario, name, faultkit.FormatCounts(idle.Writes()))
	}
	return nil
}

// createNamespaces creates namespaces (existing ones are fine).
func (b *bench) createNamespaces(ctx context.Context, names []string, labels map[string]string) error {
	return parallel(ctx, len(names), b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels}}
		_, err := b.e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// createSource creates (or replaces the data of) a source Secret.
func (b *bench) createSource(ctx context.Context, name string, data map[string][]byte) error {
	// Consent (SPEC C1), so that -manager-arg=--require-source-consent
	// measures the same thing.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: credsNamespace, Name: name,
		Labels:      map[string]string{"captf.io/credential": "true"},
		Annotations: map[string]string{"captf.io/credential-identities": "*"},
	}, Data: data}
	_, err := b.e.kube.CoreV1().Secrets(credsNamespace).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return b.setSource(ctx, name, data)
	}
	return err
}

// setSource replaces a source Secret's data (a rotation).
func (b *bench) setSource(ctx context.Context, name string, data map[string][]byte) error {
	secrets := b.e.kube.CoreV1().Secrets(credsNamespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Data = data
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err
}

// createIdentity creates an identity (or replaces its spec).
func (b *bench) createIdentity(ctx context.Context, name, source string, allowed *v1alpha1.AllowedNamespaces) error {
	api := b.e.captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	id := &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: v1alpha1.SecretReference{Namespace: credsNamespace, Name: source}, AllowedNamespaces: allowed}}
	_, err := api.Create(ctx, id, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		old, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		old.Spec = id.Spec
		_, err = api.Update(ctx, old, metav1.UpdateOptions{})
		return err
	}
	return err
}

// credentialData returns fresh random cloud credentials.
func credentialData() map[string][]byte {
	return map[string][]byte{
		"AWS_ACCESS_KEY_ID":     []byte("AKIA" + strings.ToUpper(randomHex(8))),
		"AWS_SECRET_ACCESS_KEY": []byte(randomHex(20)),
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// baselineSecret is a plain Secret the baseline loop writes.
type baselineSecret struct {
	ns, name string
	obj      *corev1.Secret // as last written
}

// baselineCreate creates the Secrets with a client limited like the
// manager's and as many goroutines as the manager has workers per queue,
// and returns how long it took: the cost of the writes a scenario
// requires, done by a plain client-go loop.
func (b *bench) baselineCreate(ctx context.Context, items []*baselineSecret) (time.Duration, error) {
	return b.baseline(ctx, items, func(ctx context.Context, client kubernetes.Interface, it *baselineSecret) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: it.ns, Name: it.name}, Data: credentialData()}
		out, err := client.CoreV1().Secrets(it.ns).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			out, err = client.CoreV1().Secrets(it.ns).Get(ctx, it.name, metav1.GetOptions{})
		}
		it.obj = out
		return err
	})
}

// baselineUpdate changes the data of each Secret once (one update per
// rotated mirror: what SPEC P3 allows) under the same limits. With reread,
// each update follows a GET of the Secret: what a mirror rewrite cost
// before P3 (B1 re-read the mirror uncached before rewriting it).
func (b *bench) baselineUpdate(ctx context.Context, items []*baselineSecret, reread bool) (time.Duration, error) {
	return b.baseline(ctx, items, func(ctx context.Context, client kubernetes.Interface, it *baselineSecret) error {
		s := it.obj.DeepCopy()
		if reread {
			var err error
			if s, err = client.CoreV1().Secrets(it.ns).Get(ctx, it.name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		s.Data = credentialData()
		out, err := client.CoreV1().Secrets(it.ns).Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		it.obj = out
		return nil
	})
}

// baselineContract does what a convergence from nothing requires of any
// implementation with the manager's clients: one create per mirror on one
// client and, at the same time, one write per workload object (its status,
// which must come to say CredentialsMirrored=True) on a second client,
// both limited like the manager's core and captf clients. The stand-ins
// for the status writes are ConfigMap creates (the manager does not watch
// ConfigMaps); what bounds both is the client's rate limit. It returns
// when both are done.
func (b *bench) baselineContract(ctx context.Context, mirrors []*baselineSecret, objects int, namespaces []string) (time.Duration, error) {
	statusClient, err := b.e.baselineClient()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- parallel(ctx, objects, b.cfg.Workers, func(ctx context.Context, i int) error {
			ns := namespaces[i%len(namespaces)]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-status-%d", baselineName, i)},
				Data: map[string]string{"condition": "CredentialsMirrored=True"}}
			_, err := statusClient.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}()
	_, err = b.baselineCreate(ctx, mirrors)
	if serr := <-done; err == nil {
		err = serr
	}
	return time.Since(start), err
}

// baseline runs write for every item on the baseline client, with as many
// goroutines as the manager has workers per queue, and returns how long
// it took.
func (b *bench) baseline(ctx context.Context, items []*baselineSecret, write func(context.Context, kubernetes.Interface, *baselineSecret) error) (time.Duration, error) {
	client, err := b.e.baselineClient()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = parallel(ctx, len(items), b.cfg.Workers, func(ctx context.Context, i int) error {
		return write(ctx, client, items[i])
	})
	return time.Since(start), err
}

// listMirrors lists every mirror (one LIST, by label) by namespace/name.
func listMirrors(ctx context.Context, kube kubernetes.Interface) (map[string]*corev1.Secret, error) {
	list, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		out[s.Namespace+"/"+s.Name] = s
	}
	return out, nil
}

// environment describes the machine and the versions measured.
func environment(cfg *Config) map[string]string {
	out := map[string]string{
		"go":   runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"cpus": fmt.Sprint(runtime.NumCPU()),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				out["cpu"] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		out["load average at start"] = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	for _, c := range []string{"kube-apiserver", "etcd"} {
		if b, err := os.ReadFile(filepath.Join(cfg.Root, "bin", "."+c+".version")); err == nil {
			out[c] = strings.TrimSpace(string(b))
		}
	}
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = cfg.Root
	if b, err := cmd.Output(); err == nil {
		out["captf commit"] = strings.TrimSpace(string(b))
	}
	return out
}

func configMap(c *Config) map[string]any {
	return map[string]any{
		"scenarios":           c.Scenarios,
		"namespaces":          c.Namespaces,
		"unrelatedSecrets":    c.UnrelatedSecrets,
		"unrelatedNamespaces": c.UnrelatedNamespaces,
		"unrelatedSize":       c.UnrelatedSize,
		"labelledSecrets":     c.LabelledSecrets,
		"labelledSize":        c.LabelledSize,
		"sharedObjects":       c.SharedObjects,
		"sharedNamespaces":    c.SharedNamespaces,
		"sharedIdentities":    c.SharedIdentities,
		"jobObjects":          c.JobObjects,
		"jobNamespaces":       c.JobNamespaces,
		"jobCap":              c.JobCap,
		"jobHold":             c.JobHold.String(),
		"capiClusters":        c.CAPIClusters,
		"capiMachines":        c.CAPIMachines,
		"capiIdentities":      c.CAPIIdentities,
		"capiRestarts":        c.CAPIRestarts,
		"driftObjects":        c.DriftObjects,
		"driftNamespaces":     c.DriftNamespaces,
		"driftInterval":       c.DriftInterval.String(),
		"driftSyncPeriod":     c.DriftSyncPeriod.String(),
		"qps":                 c.QPS,
		"burst":               c.Burst,
		"workers":             c.Workers,
		"s4IdentityResync":    c.S4Resync.String(),
		"r2SyncPeriod":        c.R2SyncPeriod.String(),
		"longPeriod":          c.LongPeriod.String(),
		"steadySyncPeriod":    c.SteadySyncPeriod.String(),
		"s4PassPeriod":        c.S4PassPeriod.String(),
		"managerArgs":         c.ManagerArgs,
		"restartBinary":       c.RestartBinary,
		"managerGOMEMLIMIT":   c.ManagerMemoryLimit,
		"noBaselines":         c.NoBaselines,
	}
}
