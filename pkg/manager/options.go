package manager

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/drift"
	"github.com/captf/captf/pkg/statebackup"
)

// Options are the flags of `captf manager` (SPEC section 12).
type Options struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster configuration.
	Kubeconfig string
	// SyncPeriod bounds how long a rotation takes to reach every mirror: every
	// workload object is re-enqueued once per period (SPEC R2).
	SyncPeriod time.Duration
	// IdentityResync is how often the identity controller re-reads each
	// source Secret (SPEC S1).
	IdentityResync time.Duration
	// WatchSources watches each identity's source Secret by name and pushes
	// its changes to the users at once (SPEC P2); false leaves rotation to
	// the periods (R2, S4).
	WatchSources bool
	// Workers is the number of workers per queue.
	Workers int
	// QPS and Burst limit each of the manager's API clients (core and captf;
	// events get half on a client of their own).
	QPS   float64
	Burst int

	// LeaderElect runs the controllers only in the replica holding the Lease.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; empty means the manager's own
	// namespace in-cluster, else kube-system.
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// WebhookPort serves the admission webhook; 0 disables it.
	WebhookPort int
	// WebhookHost is the address the webhook binds to; empty means all.
	WebhookHost string
	// WebhookCertDir holds tls.crt and tls.key for the webhook.
	WebhookCertDir string
	// WebhookMaxInFlight caps the webhook's concurrent requests; more are
	// answered 429 with Retry-After (SPEC B5).
	WebhookMaxInFlight int
	// WebhookQPS and WebhookBurst limit the webhook's own API client (its
	// SubjectAccessReviews), apart from the controllers' (SPEC B14).
	WebhookQPS   float64
	WebhookBurst int
	// WebhookClientCA, when set, is a PEM file of the CA that signs the
	// client certificate the API server presents to the webhook: the
	// webhook then refuses, at TLS, any connection without a certificate it
	// signed (SPEC B14).
	WebhookClientCA string
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS to authenticated, authorized
	// callers only (SPEC B4); false serves plain HTTP to anyone, for local
	// debugging.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for /metrics; empty means a
	// self-signed certificate generated at start.
	MetricsCertDir string
	// Profiling serves Go's profiles under /debug/pprof/ on the metrics
	// server, behind its authentication and authorization.
	Profiling bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// RunnerImage is the image whose captf binary the Jobs' init container
	// copies into the module image (SPEC J5).
	RunnerImage string
	// ShutdownTimeout bounds the graceful stop of the HTTP servers.
	ShutdownTimeout time.Duration
	// RequireSourceConsent makes a source Secret usable only when its owner
	// labelled it captf.io/credential=true and named the identity in
	// captf.io/credential-identities (SPEC C1).
	RequireSourceConsent bool
	// MaxActiveJobs caps the Jobs running at once across the manager;
	// 0 is no cap (SPEC O4, A3-94).
	MaxActiveJobs int
	// ClusterMaxActiveJobs caps the Jobs of one TerraformCluster, its
	// machines and pools, where its spec.maxActiveJobs is unset; 0 is no
	// cap (SPEC O4, A3-95).
	ClusterMaxActiveJobs int
	// StateBackups is how many backups of each object's Terraform state
	// are kept, one per serial; 0 takes none (SPEC O5, A3-43).
	StateBackups int
	// DriftDefaultInterval is the drift interval of an object that sets
	// none, nor its cluster's spec.defaults.drift; 0 turns drift checks
	// off (SPEC O7, A2-04).
	DriftDefaultInterval time.Duration
}

// NewOptions returns the defaults of SPEC section 12.
func NewOptions() *Options {
	return &Options{
		SyncPeriod:             10 * time.Minute,
		IdentityResync:         5 * time.Minute,
		WatchSources:           true,
		Workers:                8,
		QPS:                    50,
		Burst:                  100,
		LeaderElect:            true,
		LeaderElectionID:       "captf-manager",
		LeaseDuration:          15 * time.Second,
		RenewDeadline:          10 * time.Second,
		RetryPeriod:            2 * time.Second,
		WebhookPort:            9443,
		WebhookCertDir:         "/tmp/k8s-webhook-server/serving-certs",
		WebhookMaxInFlight:     admission.DefaultMaxInFlight,
		WebhookQPS:             20,
		WebhookBurst:           40,
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
		HealthProbeBindAddress: ":8081",
		RunnerImage:            "ghcr.io/captf/captf:latest",
		ShutdownTimeout:        30 * time.Second,
		MaxActiveJobs:          200,
		ClusterMaxActiveJobs:   20,
		StateBackups:           statebackup.DefaultKeep,
		DriftDefaultInterval:   drift.DefaultInterval,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig. Empty: in-cluster configuration.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "Every workload object is reconciled at least this often, so a rotated source Secret reaches every mirror within it (SPEC R2).")
	fs.DurationVar(&o.IdentityResync, "identity-resync", o.IdentityResync, "How often each identity's source Secret is re-read (30s, or this if shorter, while not Ready) (SPEC S1).")
	fs.BoolVar(&o.WatchSources, "watch-sources", o.WatchSources, "Watch each identity's source Secret by name (one field-selected watch per distinct spec.secretRef) and reconcile the identity's users as soon as its data changes (SPEC P2). false: rotation waits for --identity-resync or --sync-period.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Workers per queue (one queue per kind).")
	fs.Float64Var(&o.QPS, "kube-api-qps", o.QPS, "Sustained requests per second to the API server, for each of the manager's two API clients (core: Secrets, Jobs; captf: the four kinds). Events use half of it on a client of their own.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of requests to the API server, per API client like --kube-api-qps.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Run the controllers only while holding the leader Lease. The webhook serves in every replica.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader Lease. Empty: the manager's namespace in-cluster, else kube-system.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "How long a non-leader waits before taking over an unrenewed Lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "How long the leader retries renewing before it gives up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "How often leader election is retried.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port of the admission webhook server; 0 disables it.")
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "Address the webhook server binds to. Empty: every address.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir, "Directory with the webhook's tls.crt and tls.key; reloaded when they change.")
	fs.IntVar(&o.WebhookMaxInFlight, "webhook-max-in-flight", o.WebhookMaxInFlight, "Admission requests the webhook serves at once; more are answered 429 with Retry-After, never queued (SPEC B5).")
	fs.Float64Var(&o.WebhookQPS, "webhook-kube-api-qps", o.WebhookQPS, "Sustained requests per second of the webhook's own API client (its SubjectAccessReviews), apart from the controllers' clients: a flood of admission requests cannot spend their budget (SPEC B14). A review that would wait past its request's deadline is refused (A5).")
	fs.IntVar(&o.WebhookBurst, "webhook-kube-api-burst", o.WebhookBurst, "Burst of the webhook's own API client, like --webhook-kube-api-qps.")
	fs.StringVar(&o.WebhookClientCA, "webhook-client-ca", o.WebhookClientCA, "PEM file of the CA that signs the API server's webhook client certificate (its AdmissionConfiguration names a kubeconfig for the webhook; docs/deploy.md). Set, the webhook refuses at TLS every connection without a certificate that CA signed; reloaded when it changes (SPEC B14). Empty: any client that reaches the port may call the webhook.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over HTTPS, only to callers whose bearer token passes a TokenReview and a SubjectAccessReview for get on the non-resource URL /metrics (SPEC B4). false serves plain HTTP to anyone: local debugging only.")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir, "Directory with the /metrics tls.crt and tls.key; reloaded when they change. Empty: a self-signed certificate generated at start.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on the metrics endpoint, behind the same authentication and a SubjectAccessReview for get on the profile's path (RBAC nonResourceURLs \"/debug/pprof/*\"). A CPU profile or trace lasts at most 29 s. The reviewed path is /debug/pprof/..., as for kube-apiserver's own profiles: a grant of it covers both.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz; 0 disables them.")
	fs.StringVar(&o.RunnerImage, "runner-image", o.RunnerImage, "Image with the captf binary, copied into each Job by its init container (SPEC J5).")
	fs.BoolVar(&o.RequireSourceConsent, "require-source-consent", o.RequireSourceConsent, "Use a source Secret only when it is labelled captf.io/credential=true and lists the identity in the annotation captf.io/credential-identities (SPEC C1). Recommended.")
	fs.IntVar(&o.MaxActiveJobs, "max-active-jobs", o.MaxActiveJobs, "Terraform Jobs that run at once across the manager (unfinished Jobs labelled captf.io/managed=true, plus starts not yet seen); a Job beyond it waits with ApplyJobSucceeded=Unknown/WaitingForJobSlot, destroys first, then applies, each oldest first (SPEC O4). 0: no cap.")
	fs.DurationVar(&o.DriftDefaultInterval, "drift-default-interval", o.DriftDefaultInterval, "How long after an object's newest finished run its drift check (refresh and plan, no apply) is due, where neither its spec.drift nor its cluster's spec.defaults.drift sets an interval; each object adds a fixed jitter under 10% (SPEC O7). 0: no drift checks.")
	fs.IntVar(&o.ClusterMaxActiveJobs, "cluster-max-active-jobs", o.ClusterMaxActiveJobs, "Terraform Jobs that run at once for one TerraformCluster, its machines and its pools, where the cluster sets no spec.maxActiveJobs; beyond it Jobs wait like --max-active-jobs (SPEC O4). 0: no cap.")
	fs.IntVar(&o.StateBackups, "state-backups", o.StateBackups, "Backups kept of each object's Terraform state: each new state serial read after a successful apply is copied to the Secret captf-state-backup-<suffix>-<serial>, the newest this many are kept and listed in status.stateBackups (SPEC O5). 0: no backups; at most 32.")
}

// Validate reports every invalid option at once.
func (o *Options) Validate() error {
	var errs []error
	if o.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--sync-period must be positive, got %s", o.SyncPeriod))
	}
	if o.IdentityResync <= 0 {
		errs = append(errs, fmt.Errorf("--identity-resync must be positive, got %s", o.IdentityResync))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.QPS))
	}
	if o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.Burst))
	}
	if o.WebhookPort < 0 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be 0-65535, got %d", o.WebhookPort))
	}
	if o.Profiling && (o.MetricsBindAddress == "" || o.MetricsBindAddress == "0") {
		errs = append(errs, errors.New("--profiling needs the metrics server: it serves /debug/pprof/ (--metrics-bind-address is 0)"))
	}
	if !o.MetricsSecure && o.MetricsCertDir != "" {
		errs = append(errs, errors.New("--metrics-cert-dir needs --metrics-secure=true: plain HTTP uses no certificate"))
	}
	if o.WebhookMaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("--webhook-max-in-flight must be at least 1, got %d", o.WebhookMaxInFlight))
	}
	if o.WebhookQPS <= 0 {
		errs = append(errs, fmt.Errorf("--webhook-kube-api-qps must be positive, got %v", o.WebhookQPS))
	}
	if o.WebhookBurst < 1 {
		errs = append(errs, fmt.Errorf("--webhook-kube-api-burst must be at least 1, got %d", o.WebhookBurst))
	}
	if o.WebhookClientCA != "" && o.WebhookPort == 0 {
		errs = append(errs, errors.New("--webhook-client-ca needs the webhook server (--webhook-port is 0)"))
	}
	if o.LeaderElect {
		if o.LeaderElectionID == "" {
			errs = append(errs, errors.New("--leader-election-id must not be empty"))
		}
		if o.RenewDeadline >= o.LeaseDuration {
			errs = append(errs, fmt.Errorf("--leader-election-renew-deadline (%s) must be shorter than --leader-election-lease-duration (%s)", o.RenewDeadline, o.LeaseDuration))
		}
		if o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-election-retry-period (%s) must be positive and shorter than the renew deadline (%s)", o.RetryPeriod, o.RenewDeadline))
		}
	}
	if o.MaxActiveJobs < 0 {
		errs = append(errs, fmt.Errorf("--max-active-jobs must be 0 (no cap) or more, got %d", o.MaxActiveJobs))
	}
	if o.StateBackups < 0 || o.StateBackups > statebackup.MaxKeep {
		errs = append(errs, fmt.Errorf("--state-backups must be between 0 (no backups) and %d, got %d", statebackup.MaxKeep, o.StateBackups))
	}
	if o.DriftDefaultInterval < 0 || o.DriftDefaultInterval%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--drift-default-interval must be 0 (no drift checks) or a positive whole number of seconds, got %s", o.DriftDefaultInterval))
	}
	if o.ClusterMaxActiveJobs < 0 {
		errs = append(errs, fmt.Errorf("--cluster-max-active-jobs must be 0 (no cap) or more, got %d", o.ClusterMaxActiveJobs))
	}
	if o.RunnerImage == "" {
		errs = append(errs, errors.New("--runner-image must not be empty: Jobs copy the runner from it (SPEC J5)"))
	}
	return errors.Join(errs...)
}
