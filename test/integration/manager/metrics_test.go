package manager

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// TestMetricsSecure checks SPEC B4 on the real API server: the manager, run
// as its ServiceAccount with the manifests' RBAC (so tokenreviews create is
// proven sufficient, X2), serves /metrics over HTTPS only to a token the API
// server authenticates and whose user may get /metrics, and no request
// resets a counter.
func TestMetricsSecure(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)

	certDir := t.TempDir()
	caPEM, err := certs.WriteSelfSigned(certDir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	m := e.StartManager(t, framework.ManagerOptions{
		User:          controlplane.Manager,
		SecureMetrics: true,
		Args:          []string{"--metrics-cert-dir=" + certDir},
	})
	if !strings.HasPrefix(m.MetricsURL, "https://") {
		t.Fatalf("MetricsURL %s: want https", m.MetricsURL)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	url := m.MetricsURL + "/metrics"
	do := func(method, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		return resp.StatusCode, string(b)
	}
	admin := e.CP.Users[controlplane.Admin].Token
	alice := e.CP.Users[controlplane.Alice].Token

	// The admin (system:masters) may get anything, /metrics included.
	const series = `captf_api_requests_total{resource="terraformclusters",verb="watch"}`
	var body string
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		var code int
		code, body = do(http.MethodGet, admin)
		return code == http.StatusOK && strings.Contains(body, series), fmt.Sprintf("admin GET /metrics: %d %.300s", code, body)
	})
	before := sample(t, body, series)

	for _, tc := range []struct {
		name, method, token string
		want                int
	}{
		{"no token", http.MethodGet, "", http.StatusUnauthorized},
		{"a token the API server does not know", http.MethodGet, "not-a-token", http.StatusUnauthorized},
		{"alice, without captf-metrics-reader", http.MethodGet, alice, http.StatusForbidden},
		{"DELETE without a token", http.MethodDelete, "", http.StatusMethodNotAllowed},
		{"DELETE as the admin", http.MethodDelete, admin, http.StatusMethodNotAllowed},
		{"POST as the admin", http.MethodPost, admin, http.StatusMethodNotAllowed},
	} {
		code, body := do(tc.method, tc.token)
		if code != tc.want {
			t.Errorf("%s: %s /metrics = %d, want %d (%.300s)", tc.name, tc.method, code, tc.want, body)
		}
		if strings.Contains(body, "captf_") {
			t.Errorf("%s: the refusal carries metrics", tc.name)
		}
	}

	// The DELETEs reset nothing.
	code, body := do(http.MethodGet, admin)
	if code != http.StatusOK {
		t.Fatalf("admin GET /metrics after DELETE: %d %.300s", code, body)
	}
	if after := sample(t, body, series); after < before || after == 0 {
		t.Errorf("%s went from %v to %v after DELETE /metrics: reset", series, before, after)
	}

	// Plain HTTP on the port gets nothing.
	plain := &http.Client{Timeout: 10 * time.Second}
	if resp, err := plain.Get(strings.Replace(url, "https://", "http://", 1)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "captf_") {
			t.Errorf("plain HTTP GET /metrics: %d, want a refusal", resp.StatusCode)
		}
	}

	// Bound to the shipped ClusterRole, alice may scrape: refusals are not
	// cached, so it takes effect as soon as the API server's authorizer sees
	// the binding.
	_, err = e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-captf-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "captf-metrics-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: controlplane.Alice}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.RbacV1().ClusterRoleBindings().Delete(framework.Context(t), "alice-captf-metrics", metav1.DeleteOptions{})
	})
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		code, body := do(http.MethodGet, alice)
		return code == http.StatusOK && strings.Contains(body, "captf_mirror_staleness_seconds"),
			fmt.Sprintf("alice GET /metrics after the binding: %d %.300s", code, body)
	})
	// bob still may not.
	if code, body := do(http.MethodGet, e.CP.Users[controlplane.Bob].Token); code != http.StatusForbidden {
		t.Errorf("bob GET /metrics = %d, want 403 (%.300s)", code, body)
	}
	if strings.Contains(m.Log(), alice) || strings.Contains(m.Log(), admin) {
		t.Errorf("the manager's log contains a bearer token")
	}
}

// sample is the value of series in a /metrics text.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", series)
	return 0
}
