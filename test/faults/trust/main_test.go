// Package trust attacks the manager from the tenant's side of the trust
// boundary (SPEC section 17, issues 13 and 20) on the real control plane (etcd,
// kube-apiserver) with `captf manager` run as a subprocess as its
// ServiceAccount user with manifests/rbac applied and the deployed webhook
// configuration pointed at it. Each test is written as the attack, forging
// objects as the admin (system:masters): B3's ValidatingAdmissionPolicy
// would stop a tenant, but B1, B2 and B8 must hold without it.
//
//   - B1, a flood of Secrets and Jobs carrying the labels the manager's
//     informers select on, each close to the size limit: the manager's RSS
//     grows by far less than the data added, identity admission keeps
//     working and the manager keeps converging;
//   - B2, a forged suspended Job and a forged owner-less mirror with old
//     hashes: RotationComplete, MirrorsCurrent, status.mirrors and
//     status.rotation are unaffected, and the look-alike mirror still holds
//     the identity as the seeds say (S2, A4);
//   - B8, a mirror the tenant made immutable (MirrorFailed, never reported
//     current, recreated once deleted) and revocation with the source
//     Secret deleted (V1, V5);
//   - B10, a state Secret that is a gzip bomb (16 MiB of [0,0,0,...], the
//     same in an output, 16M levels of nesting) read after a successful
//     apply: OutputsReadFailed once, no second read, a bounded peak RSS;
//   - B11 and B15, look-alike state Secrets of 1 MiB beside a destroy's
//     clean-up (kept, never listed whole) and Jobs of 1 MiB labelled
//     captf.io/managed=true beside the fresh Job reads of new clusters;
//   - B13, issue 20's clusters and machines sharing one cluster-name label
//     with the manager running: identity DELETE within 1 s, I4 fan-out,
//     other identities converging;
//   - B14, a flood of AdmissionReviews needing SubjectAccessReviews at the
//     webhook's port (the controllers' client sends none, the webhook's
//     stays under its rate limit, rotation converges), and
//     --webhook-client-ca (refused at TLS without the certificate; the API
//     server, which presents it, is served);
//   - last, an X1 scan for every credential value used.
//
// The B10-B15 tests run the manager under GOMEMLIMIT as the shipped
// Deployment sets it and measure its peak RSS over the attack.
//
// `make test` runs the short variant; CAPTF_FAULTS_FULL=1 (`make
// test-faults`) the full one (200 labelled Secrets of 900 KiB, 150
// look-alike state Secrets, 100 large Jobs). Every
// figure a test measures is logged with t.Logf (run with -v to see them).
// There is no kube-controller-manager: nothing garbage-collects a forged
// object whose owner does not exist, so what the manager does with it is
// all there is to see.
package trust

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true, WebhookClientCert: true})
}

// full is set by CAPTF_FAULTS_FULL=1: the scale of issue 13.
var full = os.Getenv("CAPTF_FAULTS_FULL") == "1"

// scale returns short or, in the full variant, long.
func scale[T any](short, long T) T {
	if full {
		return long
	}
	return short
}

// secretValue is the credential every source Secret of this package
// carries; TestX1NoSecretValueAnywhere scans for it last (SPEC X1).
const secretValue = "tr-Cr3dential-VALUE-91c4e2"

// rotatedValue returns the n-th rotated credential: it starts with
// secretValue, so the X1 scan catches every rotation too.
func rotatedValue(n int) string { return fmt.Sprintf("%s-r%d", secretValue, n) }

// rotations is how many rotatedValue the package uses (for the X1 scan).
const rotations = 4

const (
	syncPeriod     = 5 * time.Second
	identityResync = 3 * time.Second
	// settle bounds every wait: a polling deadline on a loaded 2-core
	// machine, never a sleep.
	settle = 90 * time.Second
	// moduleImage makes a workload object start Jobs; "" stops it at the
	// mirror.
	moduleImage = "example.com/module:1"
)

// start runs a manager of the test's own (its log kept for the package's
// X1 scan) with the webhook served and installed, and returns a fixture on
// it. kubeconfig, when given, replaces the manager user's (a proxy's).
func start(t *testing.T, kubeconfig ...string) *framework.Fixture {
	e := framework.Get(t)
	dir, ca := framework.WebhookCert(t)
	m := e.StartManagerKeepLog(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookCertDir: dir,
		Kubeconfig: strings.Join(kubeconfig, ""), Args: []string{"--sync-period=" + syncPeriod.String(), "--identity-resync=" + identityResync.String(), "--workers=4"}})
	e.InstallWebhook(t, m, ca)
	return &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: settle}
}
