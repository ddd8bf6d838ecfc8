package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/test/fakecloud"
)

// cloudNamespace holds the fake cloud and the identity's source Secret
// (test/e2e/manifests/fakecloud.yaml).
const (
	cloudNamespace = "captf-credentials"
	cloudSecret    = "fakecloud-credentials"
	tokenKey       = "FAKECLOUD_TOKEN"
	// cloudEndpoint is the fake cloud's Service as pods reach it (a fixed
	// ClusterIP: pods have no cluster DNS here).
	cloudEndpoint = "http://10.0.0.15:8080"
)

// cloud asks the fake cloud directly, from this host, at its pod's address
// on the node's bridge (the test runs as root on the node's host).
type cloud struct {
	e *env
}

// url is the fake cloud pod's base URL.
func (c cloud) url(ctx context.Context) (string, error) {
	list, err := c.e.kube.CoreV1().Pods(cloudNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=fakecloud"})
	if err != nil {
		return "", err
	}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return "http://" + p.Status.PodIP + ":8080", nil
		}
	}
	return "", fmt.Errorf("no running fake cloud pod")
}

func (c cloud) get(ctx context.Context, path, token string, into any) error {
	base, err := c.url(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, into)
}

// seen is the fake cloud's record of requests, oldest first.
func (c cloud) seen(ctx context.Context, t *testing.T) []fakecloud.Request {
	t.Helper()
	var out struct {
		Requests []fakecloud.Request `json:"requests"`
	}
	if err := c.get(ctx, "/seen", "", &out); err != nil {
		t.Fatalf("the fake cloud's /seen: %v", err)
	}
	return out.Requests
}

// resources lists the fake cloud's resources with token.
func (c cloud) resources(ctx context.Context, t *testing.T, token string) []fakecloud.Resource {
	t.Helper()
	var out struct {
		Resources []fakecloud.Resource `json:"resources"`
	}
	if err := c.get(ctx, "/resources", token, &out); err != nil {
		t.Fatalf("the fake cloud's /resources: %v", err)
	}
	return out.Resources
}

// match selects recorded requests after seq.
type match struct {
	after  int
	method string
	path   string
	source string
}

func (m match) filter(seen []fakecloud.Request) []fakecloud.Request {
	var out []fakecloud.Request
	for _, r := range seen {
		if r.Seq > m.after && r.Method == m.method && r.Path == m.path && (m.source == "" || r.Source == m.source) {
			out = append(out, r)
		}
	}
	return out
}

func describe(seen []fakecloud.Request) string {
	var b strings.Builder
	for _, r := range seen {
		fmt.Fprintf(&b, "\n  #%d %s %s source=%s credential=%s generation=%d status=%d", r.Seq, r.Method, r.Path, r.Source, r.Credential, r.Generation, r.Status)
	}
	return b.String()
}

func lastSeq(seen []fakecloud.Request) int {
	if len(seen) == 0 {
		return 0
	}
	return seen[len(seen)-1].Seq
}

// moduleID is the id test/e2e/module gives its resource.
func moduleID(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "r-" + hex.EncodeToString(sum[:])[:16]
}
