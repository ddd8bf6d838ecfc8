// Command bench measures captf against a real control plane (issue 6): it
// starts etcd and kube-apiserver from bin/ (test/controlplane), installs the
// CRDs, builds cmd/captf and runs `captf manager` as a subprocess with the
// flags each scenario needs, builds the scenario with a fast client, and
// prints a table of figures, each beside a same-run baseline where one
// applies: a plain client-go loop, limited like the manager (--kube-api-qps,
// --kube-api-burst, --workers goroutines), doing the writes the scenario
// requires.
//
// Scenarios (run in this order; select with -scenarios):
//
//	fanout    one identity (selector: {}), -namespaces namespaces with one
//	          TerraformCluster each: time until every namespace has its mirror
//	          and every object CredentialsMirrored=True.
//	rotation  the source Secret's data changes: time until every mirror carries
//	          the new hash (first, p50, p95, max), once at the default periods
//	          with the source watch that pushes it (P2), then with the watch
//	          off (--watch-sources=false) through the fallbacks: the identity
//	          resync (S4: --identity-resync short, --sync-period long) and the
//	          workload resync (R2: the reverse), each with its own manager.
//	memory    manager RSS and Go heap before and after -unrelated-secrets 1 KiB
//	          Secrets in -unrelated-namespaces namespaces that captf does not
//	          use, then after -labelled-secrets 900 KiB Secrets labelled
//	          captf.io/mirrored=true (B1: its cache holds no Secret data),
//	          each beside the data added.
//	shared    -shared-objects clusters, machines and pools in -shared-namespaces
//	          namespaces sharing -shared-identities identities: convergence time,
//	          write conflicts, and every mirror's owner references exactly its
//	          users.
//	steady    one full --sync-period pass after convergence: the manager's API
//	          requests by verb and resource, source reads, mirror writes (must
//	          be 0); then the manager's RSS and Go heap over every object.
//	restart   a new manager over the converged objects: time to idle,
//	          requests, writes (mirror writes must be 0), RSS and heap.
//	s4pass    one identity resync pass (S4) over every identity: duration,
//	          source GETs, requests, writes (mirror writes must be 0).
//	jobs      O4's herd: -job-objects clusters with a module, created while
//	          no manager runs, all due at once when a manager with
//	          --max-active-jobs=-job-cap starts; a finisher completes each
//	          Job -job-hold after it appears (no node here): Jobs started
//	          per second, time until all applied beside the ideal the cap
//	          and hold imply, most Jobs at once (must not exceed the cap),
//	          and writes in the next --sync-period pass (must be 0).
//	capi      Cluster API's core manager runs; -capi-clusters Clusters with
//	          -capi-machines Machines each own their captf objects (one
//	          namespace per Cluster, -capi-identities identities); a
//	          finisher plays the apply Jobs' pods: time until all are
//	          provisioned, then one --sync-period pass and a restart, each
//	          one source GET per identity and no write (issue 21).
//	drift     O7 at scale (issue 24): -drift-objects clusters with a module
//	          in -drift-namespaces namespaces under a manager with
//	          --drift-default-interval=-drift-interval; a finisher completes
//	          every Job, a drift Job's pod ending with the runner's document
//	          of a check that found no drift. After every cluster applied,
//	          the manager's requests are sampled every second for one
//	          interval, the largest jitter and a slack after the last apply:
//	          drift Jobs per cluster (must be exactly one), none before it is
//	          due, writes per drift Job, and writes while no check is due or
//	          being recorded (must be 0). Long: the interval itself (30m by
//	          default, so about 40 minutes), and not part of -smoke.
//
// Durations are reported, never asserted. With -check (make bench-smoke, and
// TestBenchSmoke) the program fails when a correctness check fails: an object
// not mirrored, a lost or extra owner reference, a rotation that does not
// complete, a mirror write in a steady pass or a restart, a cluster with more
// or fewer drift Jobs than its interval implies, a write between drift checks.
//
//	go run ./test/bench                      # full run (make bench)
//	go run ./test/bench -smoke -check        # the CI-sized run (make bench-smoke)
//	go run ./test/bench -scenarios=fanout -namespaces=300 -json=out.json
//	go run ./test/bench -scenarios=drift -drift-objects=50 -drift-interval=2m -check
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	mgr "github.com/captf/captf/pkg/manager"
)

// allScenarios in the order they run.
var allScenarios = []string{"fanout", "rotation", "memory", "shared", "steady", "restart", "s4pass", "jobs", "capi", "drift"}

// smokeScenarios are the scenarios of -smoke: all but drift, which lasts
// at least one drift interval.
var smokeScenarios = []string{"fanout", "rotation", "memory", "shared", "steady", "restart", "s4pass", "jobs", "capi"}

// Config are the benchmark's settings.
type Config struct {
	Scenarios []string

	// Sizes.
	Namespaces          int
	UnrelatedSecrets    int
	UnrelatedNamespaces int
	UnrelatedSize       int
	// LabelledSecrets Secrets of LabelledSize bytes carry the label the
	// manager's Secret informer selects on (SPEC B1: any tenant can put it
	// on its own Secrets); 0 skips that part of the memory scenario.
	LabelledSecrets  int
	LabelledSize     int
	SharedObjects    int
	SharedNamespaces int
	SharedIdentities int
	// JobObjects clusters with a module in JobNamespaces namespaces run
	// under --max-active-jobs=JobCap; each Job takes JobHold.
	JobObjects, JobNamespaces, JobCap int
	JobHold                           time.Duration
	// CAPIClusters Cluster API Clusters with CAPIMachines Machines each,
	// using CAPIIdentities identities.
	CAPIClusters, CAPIMachines, CAPIIdentities int
	// CAPIRestarts is how many times the capi scenario restarts the manager.
	CAPIRestarts int
	// DriftObjects clusters with a module in DriftNamespaces namespaces
	// under --drift-default-interval=DriftInterval.
	DriftObjects, DriftNamespaces int
	DriftInterval                 time.Duration
	// DriftSyncPeriod is the drift manager's --sync-period.
	DriftSyncPeriod time.Duration

	// The manager's client limits and workers (and the baseline's). Zero
	// values mean the manager's defaults; the manager gets a flag only
	// when one was set.
	QPS                          float64
	Burst                        int
	Workers                      int
	qpsSet, burstSet, workersSet bool
	// S4Resync is --identity-resync of the S4 rotation run; R2SyncPeriod
	// --sync-period of the R2 run; LongPeriod the period that must not
	// fire in a run.
	S4Resync, R2SyncPeriod, LongPeriod time.Duration
	// SteadySyncPeriod is --sync-period of the steady run; 0 means long
	// enough for the start-up pass and the measured pass to finish in it.
	SteadySyncPeriod, MemorySettle time.Duration
	// S4PassPeriod is --identity-resync of the s4pass run.
	S4PassPeriod time.Duration
	// Quiet is how long the manager must make no request, with empty
	// queues, to count as idle.
	Quiet time.Duration
	// Timeout bounds every wait for convergence (never asserted as a
	// duration: only a convergence that never comes fails).
	Timeout time.Duration
	// CreateWorkers is the fast client's concurrency.
	CreateWorkers int

	Check       bool
	JSON        string
	Keep        bool
	WorkDir     string
	Root        string
	ManagerArgs []string
	// Profile, when set, runs every manager with --profiling and writes
	// CPU and heap profiles of the restart scenario into this directory.
	Profile string
	// RestartBinary, when set, is a second captf binary the restart
	// scenario also restarts with over the same objects (scenario
	// restart-b): two trees compared on one fleet, one machine load.
	RestartBinary string
	// NoBaselines skips the shared scenario's two baselines (their
	// ratios are then not reported): a run that measures only memory and
	// restarts at a large size.
	NoBaselines bool
	// ManagerMemoryLimit, when set, is the managers' GOMEMLIMIT (the
	// shipped Deployment sets it from limits.memory, B5); the control
	// plane runs without one.
	ManagerMemoryLimit string
}

// defaultConfig is the full run of `make bench`.
func defaultConfig() *Config {
	d := mgr.NewOptions()
	return &Config{
		Scenarios:           allScenarios,
		Namespaces:          1000,
		UnrelatedSecrets:    10000,
		UnrelatedNamespaces: 100,
		UnrelatedSize:       1024,
		LabelledSecrets:     200,
		LabelledSize:        900 << 10,
		SharedObjects:       2000,
		SharedNamespaces:    100,
		SharedIdentities:    10,
		JobObjects:          1000,
		JobNamespaces:       20,
		JobCap:              50,
		JobHold:             2 * time.Second,
		CAPIClusters:        300,
		CAPIMachines:        2,
		CAPIIdentities:      10,
		CAPIRestarts:        1,
		DriftObjects:        1000,
		DriftNamespaces:     20,
		DriftInterval:       30 * time.Minute,
		DriftSyncPeriod:     d.SyncPeriod,
		QPS:                 d.QPS,
		Burst:               d.Burst,
		Workers:             d.Workers,
		S4Resync:            10 * time.Second,
		R2SyncPeriod:        30 * time.Second,
		LongPeriod:          time.Hour,
		MemorySettle:        20 * time.Second,
		S4PassPeriod:        30 * time.Second,
		Quiet:               3 * time.Second,
		Timeout:             15 * time.Minute,
		CreateWorkers:       32,
	}
}

// smokeConfig is the CI-sized run (make bench-smoke, TestBenchSmoke): the
// same scenarios at sizes that fit a few minutes, with the checks on.
func smokeConfig() *Config {
	c := defaultConfig()
	c.Namespaces = 100
	c.UnrelatedSecrets = 1000
	c.UnrelatedNamespaces = 10
	c.LabelledSecrets = 20
	c.SharedObjects = 200
	c.SharedNamespaces = 20
	c.SharedIdentities = 10
	c.JobObjects = 40
	c.JobNamespaces = 4
	c.JobCap = 5
	c.JobHold = 500 * time.Millisecond
	c.CAPIClusters = 10
	c.CAPIIdentities = 3
	c.S4Resync = 5 * time.Second
	c.R2SyncPeriod = 5 * time.Second
	c.SteadySyncPeriod = 15 * time.Second
	c.MemorySettle = 3 * time.Second
	c.S4PassPeriod = 5 * time.Second
	c.Quiet = 2 * time.Second
	c.Timeout = 5 * time.Minute
	c.Check = true
	c.Scenarios = smokeScenarios
	return c
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, cfg, os.Stderr)
	if res != nil {
		res.print(os.Stdout)
		if cfg.JSON != "" {
			if werr := res.writeJSON(cfg.JSON); werr != nil {
				fmt.Fprintln(os.Stderr, "bench: writing JSON:", werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if cfg.Check && len(res.Failures) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d correctness check(s) failed\n", len(res.Failures))
		os.Exit(1)
	}
}

// stringList is a comma-separated flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = nil
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// argList is a repeatable flag.
type argList []string

func (s *argList) String() string     { return strings.Join(*s, " ") }
func (s *argList) Set(v string) error { *s = append(*s, v); return nil }

func parseFlags(args []string, stderr io.Writer) (*Config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := defaultConfig()
	smoke := fs.Bool("smoke", false, "CI-sized run: 100 namespaces, 1,000 unrelated Secrets, 20 labelled ones, 200 shared objects in 20 namespaces, short periods, -check, every scenario but drift (size flags and -scenarios still override)")
	scenarios := stringList(c.Scenarios)
	fs.Var(&scenarios, "scenarios", "comma-separated scenarios: "+strings.Join(allScenarios, ","))
	fs.IntVar(&c.Namespaces, "namespaces", c.Namespaces, "fan-out/rotation/steady: namespaces, one TerraformCluster each")
	fs.IntVar(&c.UnrelatedSecrets, "unrelated-secrets", c.UnrelatedSecrets, "memory: unrelated Secrets added")
	fs.IntVar(&c.UnrelatedNamespaces, "unrelated-namespaces", c.UnrelatedNamespaces, "memory: namespaces they are spread over")
	fs.IntVar(&c.UnrelatedSize, "unrelated-size", c.UnrelatedSize, "memory: bytes of data per unrelated Secret")
	fs.IntVar(&c.LabelledSecrets, "labelled-secrets", c.LabelledSecrets, "memory: Secrets labelled captf.io/mirrored=true added after the unrelated ones (B1); 0 skips them")
	fs.IntVar(&c.LabelledSize, "labelled-size", c.LabelledSize, "memory: bytes of data per labelled Secret (at most 1 MiB)")
	fs.IntVar(&c.SharedObjects, "shared-objects", c.SharedObjects, "shared: clusters, machines and pools")
	fs.IntVar(&c.SharedNamespaces, "shared-namespaces", c.SharedNamespaces, "shared: namespaces")
	fs.IntVar(&c.SharedIdentities, "shared-identities", c.SharedIdentities, "shared: identities")
	fs.IntVar(&c.JobObjects, "job-objects", c.JobObjects, "jobs: clusters with a module, due at once")
	fs.IntVar(&c.JobNamespaces, "job-namespaces", c.JobNamespaces, "jobs: namespaces they are spread over")
	fs.IntVar(&c.JobCap, "job-cap", c.JobCap, "jobs: the manager's --max-active-jobs")
	fs.DurationVar(&c.JobHold, "job-hold", c.JobHold, "jobs: how long each Job runs before the finisher completes it")
	fs.IntVar(&c.CAPIClusters, "capi-clusters", c.CAPIClusters, "capi: Cluster API Clusters, one namespace each")
	fs.IntVar(&c.CAPIMachines, "capi-machines", c.CAPIMachines, "capi: Machines per Cluster")
	fs.IntVar(&c.CAPIIdentities, "capi-identities", c.CAPIIdentities, "capi: identities the clusters use")
	fs.IntVar(&c.CAPIRestarts, "capi-restarts", c.CAPIRestarts, "capi: restarts of the manager over the provisioned objects, each reporting its source GETs")
	fs.IntVar(&c.DriftObjects, "drift-objects", c.DriftObjects, "drift: clusters with a module")
	fs.IntVar(&c.DriftNamespaces, "drift-namespaces", c.DriftNamespaces, "drift: namespaces they are spread over")
	fs.DurationVar(&c.DriftInterval, "drift-interval", c.DriftInterval, "drift: the manager's --drift-default-interval; the scenario lasts about 1.15 times it after the applies")
	fs.DurationVar(&c.DriftSyncPeriod, "drift-sync-period", c.DriftSyncPeriod, "drift: the manager's --sync-period; source GETs are reported per pass (default: the manager's default)")
	fs.Float64Var(&c.QPS, "qps", c.QPS, "the manager's --kube-api-qps, and the baseline's (default: the manager's default)")
	fs.IntVar(&c.Burst, "burst", c.Burst, "the manager's --kube-api-burst, and the baseline's (default: the manager's default)")
	fs.IntVar(&c.Workers, "workers", c.Workers, "the manager's --workers, and the baseline's concurrency (default: the manager's default)")
	fs.DurationVar(&c.S4Resync, "s4-identity-resync", c.S4Resync, "rotation S4: the manager's --identity-resync (its --sync-period is -long-period)")
	fs.DurationVar(&c.R2SyncPeriod, "r2-sync-period", c.R2SyncPeriod, "rotation R2: the manager's --sync-period (its --identity-resync is -long-period); must exceed one resync pass (objects / qps)")
	fs.DurationVar(&c.LongPeriod, "long-period", c.LongPeriod, "the period that must not fire: --sync-period of the S4 run, --identity-resync of the R2 and steady runs")
	fs.DurationVar(&c.SteadySyncPeriod, "steady-sync-period", 0, "steady: --sync-period of the measured pass; 0: max(30s, 2.5 x objects / qps), so the start-up pass and the measured pass each fit in one period")
	fs.DurationVar(&c.S4PassPeriod, "s4-pass-period", c.S4PassPeriod, "s4pass: the manager's --identity-resync (its --sync-period is -long-period)")
	fs.DurationVar(&c.MemorySettle, "memory-settle", c.MemorySettle, "memory: wait after adding the Secrets before sampling RSS")
	fs.DurationVar(&c.Quiet, "quiet", c.Quiet, "the manager counts as idle after this long with empty queues and no request")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "bound on every wait for convergence (a convergence that does not come fails the run)")
	fs.IntVar(&c.CreateWorkers, "create-workers", c.CreateWorkers, "concurrency of the fast client that builds scenarios")
	fs.BoolVar(&c.Check, "check", c.Check, "exit non-zero when a correctness check fails")
	fs.StringVar(&c.JSON, "json", "", "also write the results as JSON to this file ('-' for stdout)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory (control plane data and logs, manager logs)")
	fs.StringVar(&c.WorkDir, "workdir", "", "parent of the work directory (default: the system's temporary directory)")
	fs.StringVar(&c.Profile, "profile", "", "run the managers with --profiling and write the restart scenario's CPU profile (its first 25 s, from start) and heap profile (at idle) into this directory, for go tool pprof")
	fs.StringVar(&c.ManagerMemoryLimit, "manager-gomemlimit", "", "GOMEMLIMIT for every manager the benchmark starts (the shipped Deployment's is 268435456, from its 256Mi limit); empty: none")
	fs.StringVar(&c.RestartBinary, "restart-binary", "", "restart: also restart over the same objects with this captf binary (scenario restart-b, after restart; profiled too with -profile): an A/B of two trees on one fleet")
	fs.BoolVar(&c.NoBaselines, "no-baselines", false, "shared: skip the two baselines (no ratios): for memory and restart runs at large sizes")
	fs.StringVar(&c.Root, "root", "", "repository root (default: found from the working directory)")
	var extra argList
	fs.Var(&extra, "manager-arg", "extra flag for every manager run (repeatable), e.g. -manager-arg=--v=2")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments %q\n", fs.Args())
		return nil, errors.New("unexpected arguments")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *smoke {
		s := smokeConfig()
		// Flags given explicitly win over the smoke sizes.
		apply := func(name string, dst, src any) {
			if set[name] {
				return
			}
			switch d := dst.(type) {
			case *int:
				*d = *src.(*int)
			case *time.Duration:
				*d = *src.(*time.Duration)
			case *bool:
				*d = *src.(*bool)
			}
		}
		apply("namespaces", &c.Namespaces, &s.Namespaces)
		apply("unrelated-secrets", &c.UnrelatedSecrets, &s.UnrelatedSecrets)
		apply("unrelated-namespaces", &c.UnrelatedNamespaces, &s.UnrelatedNamespaces)
		apply("labelled-secrets", &c.LabelledSecrets, &s.LabelledSecrets)
		apply("shared-objects", &c.SharedObjects, &s.SharedObjects)
		apply("shared-namespaces", &c.SharedNamespaces, &s.SharedNamespaces)
		apply("shared-identities", &c.SharedIdentities, &s.SharedIdentities)
		apply("job-objects", &c.JobObjects, &s.JobObjects)
		apply("job-namespaces", &c.JobNamespaces, &s.JobNamespaces)
		apply("job-cap", &c.JobCap, &s.JobCap)
		apply("job-hold", &c.JobHold, &s.JobHold)
		apply("capi-clusters", &c.CAPIClusters, &s.CAPIClusters)
		apply("capi-identities", &c.CAPIIdentities, &s.CAPIIdentities)
		apply("s4-identity-resync", &c.S4Resync, &s.S4Resync)
		apply("r2-sync-period", &c.R2SyncPeriod, &s.R2SyncPeriod)
		apply("steady-sync-period", &c.SteadySyncPeriod, &s.SteadySyncPeriod)
		apply("memory-settle", &c.MemorySettle, &s.MemorySettle)
		apply("s4-pass-period", &c.S4PassPeriod, &s.S4PassPeriod)
		apply("quiet", &c.Quiet, &s.Quiet)
		apply("timeout", &c.Timeout, &s.Timeout)
		apply("check", &c.Check, &s.Check)
		if !set["scenarios"] {
			scenarios = s.Scenarios
		}
	}
	c.qpsSet, c.burstSet, c.workersSet = set["qps"], set["burst"], set["workers"]
	c.Scenarios = scenarios
	c.ManagerArgs = extra
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return nil, err
	}
	return c, nil
}

func (c *Config) validate() error {
	var errs []error
	for _, s := range c.Scenarios {
		if !contains(allScenarios, s) {
			errs = append(errs, fmt.Errorf("unknown scenario %q (known: %s)", s, strings.Join(allScenarios, ",")))
		}
	}
	if c.Namespaces < 1 || c.SharedNamespaces < 1 || c.SharedIdentities < 1 || c.UnrelatedNamespaces < 1 {
		errs = append(errs, errors.New("-namespaces, -shared-namespaces, -shared-identities and -unrelated-namespaces must be at least 1"))
	}
	if c.LabelledSecrets < 0 || c.LabelledSize < 1 || c.LabelledSize > 1<<20-1024 {
		errs = append(errs, errors.New("-labelled-secrets must not be negative, -labelled-size between 1 and 1 MiB less 1 KiB"))
	}
	if c.SharedObjects < c.SharedNamespaces {
		errs = append(errs, errors.New("-shared-objects must be at least -shared-namespaces"))
	}
	if c.JobObjects < 1 || c.JobNamespaces < 1 || c.JobCap < 1 || c.JobHold <= 0 {
		errs = append(errs, errors.New("-job-objects, -job-namespaces, -job-cap and -job-hold must be positive"))
	}
	if c.CAPIClusters < 1 || c.CAPIMachines < 0 || c.CAPIIdentities < 1 || c.CAPIIdentities > c.CAPIClusters || c.CAPIRestarts < 1 {
		errs = append(errs, errors.New("-capi-clusters, -capi-identities and -capi-restarts must be positive, -capi-identities at most -capi-clusters, -capi-machines not negative"))
	}
	if c.DriftObjects < 1 || c.DriftNamespaces < 1 || c.DriftInterval < 10*time.Second || c.DriftSyncPeriod < passWidth {
		errs = append(errs, errors.New("-drift-objects and -drift-namespaces must be positive, -drift-interval at least 10s, -drift-sync-period at least 30s"))
	}
	if c.QPS <= 0 || c.Burst < 1 || c.Workers < 1 || c.CreateWorkers < 1 {
		errs = append(errs, errors.New("-qps, -burst, -workers and -create-workers must be positive"))
	}
	if c.S4Resync <= 0 || c.R2SyncPeriod <= 0 || c.SteadySyncPeriod < 0 || c.S4PassPeriod <= 0 || c.LongPeriod <= c.S4PassPeriod || c.LongPeriod <= c.S4Resync || c.LongPeriod <= c.R2SyncPeriod {
		errs = append(errs, errors.New("periods must be positive and -long-period longer than the others"))
	}
	return errors.Join(errs...)
}

func (c *Config) has(s string) bool { return contains(c.Scenarios, s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
