package trust

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// deleteBound is SPEC B13's: an identity DELETE with 10,000 users is
// answered within 1 s; the attack here has fewer users.
const deleteBound = time.Second

// Webhook flood (B14): the manager's defaults, which the test checks the
// SubjectAccessReviews reaching the API server against.
const (
	webhookQPS   = 20
	webhookBurst = 40
)

// startB14 runs a manager like start, with extra flags and, when
// kubeconfig is not empty, that kubeconfig (a proxy's); it returns the
// fixture and the webhook's serving CA.
func startB14(t *testing.T, kubeconfig string, args ...string) (*framework.Fixture, []byte) {
	e := framework.Get(t)
	dir, ca := framework.WebhookCert(t)
	m := e.StartManagerKeepLog(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookCertDir: dir, Kubeconfig: kubeconfig,
		Args: append([]string{"--sync-period=" + syncPeriod.String(), "--identity-resync=" + identityResync.String(), "--workers=4"}, args...)})
	e.InstallWebhook(t, m, ca)
	return &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: settle}, ca
}

// TestB13SharedClusterNameLabel is issue 20's cubic case with the manager
// running: a tenant creates clusters and machines that all carry one
// cluster-name label, the clusters naming an identity. Before B13 every
// lookup of that identity's users cost clusters x machines x clusters, so
// an identity DELETE outlived the webhook's timeout and every identity
// change (I4) stalled a worker. Now: the DELETE is refused within B13's
// bound naming one user, an identity change re-enqueues every user at once
// (each machine reports the identity it inherits), and another identity's
// objects keep converging (a rotation and a new cluster) meanwhile.
func TestB13SharedClusterNameLabel(t *testing.T) {
	f, _ := startB14(t, "")
	victimNS := f.Env.CreateNamespace(t, "victim", nil)
	attackNS := f.Env.CreateNamespace(t, "shared-label", nil)
	victimRef := f.Source(framework.DefaultData(secretValue))
	victim := f.Identity(victimRef, framework.List(victimNS))
	c0 := cluster(f, victimNS, "c0", victim, "")
	f.WaitCondition("c0", conds(f, c0), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)

	// The attack's identity names a Secret that does not exist and, at
	// first, does not allow the attack's namespace: every reconcile of the
	// attack then ends at a status write, and no mirror of thousands of
	// owner references is written (M5), which would measure etcd, not B13.
	target := f.Identity(v1alpha1.SecretReference{Namespace: victimRef.Namespace, Name: "absent"}, framework.List(victimNS))
	n := scale(1000, 1500)
	label := map[string]string{v1alpha1.LabelClusterName: "shared"}
	start := time.Now()
	err := faultkit.Parallel(f.Ctx, n, 8, func(ctx context.Context, i int) error {
		c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: attackNS, Name: fmt.Sprintf("c-%04d", i), Labels: label},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: target}}}
		if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(attackNS).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return err
		}
		m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: attackNS, Name: fmt.Sprintf("m-%04d", i), Labels: label}}
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(attackNS).Create(ctx, m, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseWorkloads(t, f, attackNS) })
	t.Logf("B13: %d clusters and %d machines sharing one cluster-name label created in %s", n, n, time.Since(start).Round(time.Millisecond))

	// Every other identity keeps converging during the attack: a rotation
	// reaches c0's mirror and a new cluster gets its own.
	rotated := framework.DefaultData(rotatedValue(0))
	f.SetSource(victimRef, rotated)
	f.WaitMirror(victimNS, victim, "rotated during the attack", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	c1 := cluster(f, victimNS, "c1", victim, "")
	f.WaitCondition("c1", conds(f, c1), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)

	// The machines inherit the target from c-0000 (SPEC 1.2). Once they
	// all report it, an identity change (allowing their namespace) must
	// re-enqueue every one of them at once (I4): each then reports the
	// missing Secret instead.
	waitMachines(f, attackNS, n, "report identity "+target+", namespace not allowed", func(m *v1alpha1.TerraformMachine) bool {
		c := findCondition(m.Status.Conditions, v1alpha1.ConditionIdentityAllowed)
		return m.Status.Identity == target && c != nil && c.Reason == string(v1alpha1.ReasonNamespaceNotAllowed)
	})
	start = time.Now()
	f.EditIdentity(target, func(i *v1alpha1.TerraformClusterIdentity) {
		i.Spec.AllowedNamespaces = framework.List(victimNS, attackNS)
	})
	waitMachines(f, attackNS, n, "report the missing Secret after the identity change (I4)", func(m *v1alpha1.TerraformMachine) bool {
		c := findCondition(m.Status.Conditions, v1alpha1.ConditionIdentityAllowed)
		return c != nil && c.Reason == string(v1alpha1.ReasonSecretNotFound)
	})
	t.Logf("B13: the identity change reached all %d machines (and %d clusters) in %s", n, n, time.Since(start).Round(time.Millisecond))

	// The DELETE: refused, naming one user, within B13's bound.
	ids := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	var took []time.Duration
	for range 5 {
		start := time.Now()
		err := ids.Delete(f.Ctx, target, metav1.DeleteOptions{})
		took = append(took, time.Since(start))
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "is in use by TerraformCluster "+attackNS+"/c-0000;") {
			t.Fatalf("the identity DELETE must be refused naming one user; got %v", err)
		}
	}
	median := medianOf(took)
	t.Logf("B13: identity DELETE with %d users sharing one label, with the manager running: %v (median %v)", 2*n, took, median)
	if median > deleteBound {
		t.Errorf("B13: the identity DELETE took %v (median of 5), more than %v", median, deleteBound)
	}
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
	f.RequireNoSecretValues(forbiddenValues()...)
}

// TestB14AdmissionFlood: anyone who reaches the webhook's port floods it
// with valid AdmissionReviews that each need a SubjectAccessReview, while
// a rotation and a new cluster must converge. The manager reaches the API
// server through a proxy that records who sends each SubjectAccessReview:
// the controllers' client sends none, the webhook's own client sends them
// at no more than its rate limit, everything converges, and the manager
// survives.
func TestB14AdmissionFlood(t *testing.T) {
	e := framework.Get(t)
	proxy, err := faultkit.StartFlakyProxy(e.CP.URL, e.CP.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	var reviews sarCounter
	proxy.SetFaults(&faultkit.Faults{Only: func(r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/subjectaccessreviews") {
			reviews.add(r.UserAgent())
		}
		return false // record, never fault
	}})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig-proxy")
	if err := proxy.WriteKubeconfig(kubeconfig, controlplane.Manager, e.CP.Users[controlplane.Manager].Token); err != nil {
		t.Fatal(err)
	}
	f, ca := startB14(t, kubeconfig)
	tenant := f.Env.CreateNamespace(t, "tenant", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(tenant))
	c0 := cluster(f, tenant, "c0", id, "")
	f.WaitCondition("c0", conds(f, c0), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	before := reviews.snapshot()

	// The flood: 16 clients posting identity CREATE reviews, each for a
	// user the webhook must ask the API server about (A2).
	client := webhookClient(t, ca, nil)
	url := fmt.Sprintf("https://127.0.0.1:%d/validate-terraformclusteridentity?timeout=5s", f.Manager.WebhookPort)
	floodCtx, stopFlood := context.WithCancel(f.Ctx)
	var outcomes sync.Map
	var sent atomic.Int64
	var wg sync.WaitGroup
	floodStart := time.Now()
	for w := range 16 {
		wg.Go(func() {
			for i := 0; floodCtx.Err() == nil; i++ {
				body := identityReview(t, fmt.Sprintf("flood-%d-%d", w, i), ref)
				outcome := postReview(floodCtx, client, url, body)
				sent.Add(1)
				v, _ := outcomes.LoadOrStore(outcome, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}
		})
	}

	// Meanwhile: a rotation reaches the mirror, a new cluster gets one.
	rotated := framework.DefaultData(rotatedValue(1))
	f.SetSource(ref, rotated)
	f.WaitMirror(tenant, id, "rotated during the flood", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	c1 := cluster(f, tenant, "c1", id, "")
	f.WaitCondition("c1", conds(f, c1), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	converged := time.Since(floodStart)
	// Keep flooding long enough for the rate limit to show.
	if d := 15*time.Second - converged; d > 0 {
		time.Sleep(d)
	}
	stopFlood()
	wg.Wait()
	elapsed := time.Since(floodStart)
	after := reviews.snapshot()

	var summary []string
	outcomes.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%s: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	webhookSARs := after.webhook - before.webhook
	t.Logf("B14 flood: %d reviews in %s (%s); converged %s into the flood; SubjectAccessReviews sent by the webhook's client %d, by any other client %d",
		sent.Load(), elapsed.Round(time.Millisecond), strings.Join(summary, ", "), converged.Round(time.Millisecond), webhookSARs, after.other-before.other)
	if after.other != before.other || after.other != 0 {
		t.Errorf("B14: clients other than the webhook's sent %d SubjectAccessReviews (user agents %v); the controllers' client must send none", after.other, after.agents)
	}
	if webhookSARs == 0 {
		t.Fatal("the flood's reviews never reached the API server through the webhook's client: the test proves nothing")
	}
	if limit := int64(webhookQPS*elapsed.Seconds()) + webhookBurst; webhookSARs > limit+limit/10 {
		t.Errorf("B14: the webhook sent %d SubjectAccessReviews in %s, more than its rate limit allows (%d/s, burst %d: %d)",
			webhookSARs, elapsed.Round(time.Millisecond), webhookQPS, webhookBurst, limit)
	}
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited during the flood: %v", err)
	}
	// Identity admission works once the flood is over.
	ids := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	other := framework.Name("after-flood")
	if _, err := ids.Create(f.Ctx, &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: other},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an identity create after the flood was refused: %v", err)
	}
	t.Cleanup(func() { _ = ids.Delete(context.Background(), other, metav1.DeleteOptions{}) })
	f.RequireNoSecretValues(forbiddenValues()...)
}

// TestB14ClientCertificateRequired: with --webhook-client-ca, a connection
// without a client certificate, or with one another CA signed, is refused
// at TLS and reaches no validator; the API server, which presents the
// certificate its AdmissionConfiguration names, is served (a valid
// identity is admitted, an invalid selector refused by the webhook); and a
// flood of refused handshakes costs a bounded number of log lines.
func TestB14ClientCertificateRequired(t *testing.T) {
	e := framework.Get(t)
	f, ca := startB14(t, "", "--webhook-client-ca="+e.CP.WebhookClient.CAFile)
	ref := f.Source(framework.DefaultData(secretValue))
	url := fmt.Sprintf("https://127.0.0.1:%d/validate-terraformclusteridentity?timeout=5s", f.Manager.WebhookPort)
	requests := func() float64 {
		m, err := f.Manager.Scrape()
		if err != nil {
			t.Fatal(err)
		}
		return m.Sum("captf_admission_requests_total", nil)
	}
	served := requests()

	if got := postReview(f.Ctx, webhookClient(t, ca, nil), url, identityReview(t, "no-cert", ref)); !strings.HasPrefix(got, "transport error") {
		t.Fatalf("B14: a request without a client certificate must be refused at TLS; got %s", got)
	}
	other, err := tls.X509KeyPair(mustClientCert(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := postReview(f.Ctx, webhookClient(t, ca, &other), url, identityReview(t, "other-ca", ref)); !strings.HasPrefix(got, "transport error") {
		t.Fatalf("B14: a certificate another CA signed must be refused at TLS; got %s", got)
	}
	if got := requests(); got != served {
		t.Fatalf("B14: refused connections reached the handler (%v requests counted, %v before)", got, served)
	}

	// The API server's calls: a valid identity is admitted, an invalid
	// selector refused by the webhook itself (failurePolicy Fail would
	// refuse anything if the call failed, so both are needed).
	ids := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	name := framework.Name("mtls")
	if _, err := ids.Create(f.Ctx, &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("B14: the API server's call with its client certificate must be served: %v", err)
	}
	t.Cleanup(func() { _ = ids.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	_, err = ids.Create(f.Ctx, &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: framework.Name("bad")},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: &v1alpha1.AllowedNamespaces{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}}}}, metav1.CreateOptions{})
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.allowedNamespaces.selector") {
		t.Fatalf("B14: the webhook, called by the API server, must refuse an invalid selector; got %v", err)
	}
	if got := requests(); got < served+2 {
		t.Fatalf("the API server's two calls were not counted by the webhook (%v, %v before)", got, served)
	}
	// The certificate the API server presents works from a test as well.
	apiserver, err := tls.LoadX509KeyPair(e.CP.WebhookClient.CertFile, e.CP.WebhookClient.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// (Served: the review is answered, refused since user "with-cert" may
	// not read the Secret.)
	if got := postReview(f.Ctx, webhookClient(t, ca, &apiserver), url, identityReview(t, "with-cert", ref)); got != "HTTP 200, refused 422" {
		t.Fatalf("a request with the API server's client certificate must be served; got %s", got)
	}

	// 300 bare handshakes without a certificate: a bounded number of
	// log lines, the rest counted (B14).
	// One line per logged handshake error: `"HTTP server error" ...`; the
	// count of the rest is `"HTTP server errors suppressed" ...`.
	const errorLine = `"HTTP server error"`
	logBefore := strings.Count(f.Manager.Log(), errorLine)
	for range 300 {
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(f.Manager.WebhookPort)), &tls.Config{RootCAs: pool(t, ca), MinVersion: tls.VersionTLS12})
		if err == nil {
			// TLS 1.3: the server's refusal arrives with the first read.
			_, _ = conn.Read(make([]byte, 1))
			conn.Close()
		}
	}
	f.WaitFor("the manager logged the refused handshakes", func() (bool, string) {
		n := strings.Count(f.Manager.Log(), errorLine) - logBefore
		return n > 0, fmt.Sprintf("%d lines", n)
	})
	time.Sleep(time.Second) // let the server finish logging what it will
	lines := strings.Count(f.Manager.Log(), errorLine) - logBefore
	t.Logf("B14: 300 handshakes without a client certificate logged %d lines", lines)
	if lines > 2*20 {
		t.Errorf("B14: 300 refused handshakes logged %d lines; at most 20 per 10 s (plus the count) are expected", lines)
	}
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
}

// sarCounter counts SubjectAccessReviews by the client that sent them.
type sarCounter struct {
	mu     sync.Mutex
	counts sarCounts
}

type sarCounts struct {
	webhook, other int64
	agents         map[string]int64
}

// webhookAgent is how the webhook's own client ends its user agent
// (manager.WebhookUserAgent).
var webhookAgent = regexp.MustCompile(` admission$`)

func (c *sarCounter) add(agent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts.agents == nil {
		c.counts.agents = map[string]int64{}
	}
	c.counts.agents[agent]++
	if webhookAgent.MatchString(agent) {
		c.counts.webhook++
	} else {
		c.counts.other++
	}
}

func (c *sarCounter) snapshot() sarCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	out.agents = map[string]int64{}
	for k, v := range c.counts.agents {
		out.agents[k] = v
	}
	return out
}

// identityReview is an AdmissionReview of user creating an identity that
// names ref: the webhook must ask the API server whether user may read it.
func identityReview(t *testing.T, user string, ref v1alpha1.SecretReference) []byte {
	t.Helper()
	obj, err := json.Marshal(&v1alpha1.TerraformClusterIdentity{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "TerraformClusterIdentity"},
		ObjectMeta: metav1.ObjectMeta{Name: "flood-" + user},
		Spec:       v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref},
	})
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("flood-" + user),
			Kind:      metav1.GroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("TerraformClusterIdentity")),
			Resource:  metav1.GroupVersionResource(v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities")),
			Name:      "flood-" + user,
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}},
			Object:    runtime.RawExtension{Raw: obj},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return review
}

// postReview posts body and says what came back: "HTTP <code>", with the
// review's result code for a 200, or "transport error" (a refused TLS
// handshake, say).
func postReview(ctx context.Context, c *http.Client, url string, body []byte) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "request error"
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "transport error"
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	var review admissionv1.AdmissionReview
	if json.Unmarshal(data, &review) == nil && review.Response != nil && review.Response.Result != nil && !review.Response.Allowed {
		return fmt.Sprintf("HTTP 200, refused %d", review.Response.Result.Code)
	}
	return "HTTP 200"
}

// webhookClient trusts the webhook's serving CA and presents cert when
// not nil; one connection per request, as an attacker's would be.
func webhookClient(t *testing.T, ca []byte, cert *tls.Certificate) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: pool(t, ca), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	transport := &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 32}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}
}

func pool(t *testing.T, ca []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate")
	}
	return p
}

// mustClientCert returns a client certificate and key from a CA of its own.
func mustClientCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	_, certPEM, keyPEM, err := certs.GenerateClient("not-the-api-server", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// waitMachines waits until all n machines of ns satisfy ok: thousands of
// status writes at the manager's client rate, so longer than Settle.
func waitMachines(f *framework.Fixture, ns string, n int, what string, ok func(*v1alpha1.TerraformMachine) bool) {
	f.T.Helper()
	framework.Eventually(f.T, 8*time.Minute, func() (bool, string) {
		got := countMachines(f, ns, ok)
		return got == n, fmt.Sprintf("%d of %d machines %s", got, n, what)
	})
}

// countMachines counts the machines of ns for which ok holds.
func countMachines(f *framework.Fixture, ns string, ok func(*v1alpha1.TerraformMachine) bool) int {
	list, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns).List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		if ok(&list.Items[i]) {
			n++
		}
	}
	return n
}

func findCondition(conds []metav1.Condition, t v1alpha1.ConditionType) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == string(t) {
			return &conds[i]
		}
	}
	return nil
}

func medianOf(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// releaseWorkloads deletes the workload objects of ns (there is no
// namespace controller here), so later tests' managers do not list them.
func releaseWorkloads(t *testing.T, f *framework.Fixture, ns string) {
	ctx := context.Background()
	c := f.Env.Captf.InfrastructureV1alpha1()
	for _, err := range []error{
		c.TerraformMachines(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
		c.TerraformClusters(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}),
	} {
		if err != nil {
			t.Logf("cleaning up %s: %v", ns, err)
		}
	}
}
