package faultkit

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFlakyProxy checks each fault against a TLS upstream, and that a
// streamed answer flows through line by line and ends on CutStreams.
func TestFlakyProxy(t *testing.T) {
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			for i := 0; ; i++ {
				if _, err := io.WriteString(w, "event\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: upstream.Certificate().Raw})
	p, err := StartFlakyProxy(upstream.URL, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAData)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	get := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
		req.Header.Set("Authorization", "Bearer token")
		return client.Do(req)
	}
	expect := func(f *Faults, code int) {
		t.Helper()
		p.SetFaults(f)
		resp, err := get("/api/v1/namespaces")
		if code == 0 {
			if err == nil {
				resp.Body.Close()
				t.Fatalf("want a dropped connection, got %s", resp.Status)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != code {
			t.Fatalf("want %d, got %s", code, resp.Status)
		}
		if code == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("429 without Retry-After: %v", resp.Header)
		}
	}
	expect(nil, http.StatusOK)
	expect(&Faults{Error500: 1}, http.StatusInternalServerError)
	expect(&Faults{TooMany: 1}, http.StatusTooManyRequests)
	expect(&Faults{Drop: 1}, 0)
	start := time.Now()
	expect(&Faults{Slow: 1, SlowMin: 300 * time.Millisecond, SlowMax: 301 * time.Millisecond}, http.StatusOK)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a slow answer came after %s", d)
	}

	p.SetFaults(nil)
	resp, err := get("/api/v1/secrets?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for range 3 {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "event" {
			t.Fatalf("watch stream: %q %v", line, err)
		}
	}
	p.CutStreams()
	if _, err := io.ReadAll(r); err == nil {
		// A clean end is fine too, as long as it ends.
		t.Log("the cut watch ended cleanly")
	}
	c := p.Counts()
	if c[FaultError500] != 1 || c[FaultTooMany] != 1 || c[FaultDrop] != 1 || c[FaultSlow] != 1 || c[FaultCut] != 1 {
		t.Errorf("counts %s", FormatFaultCounts(c))
	}
}
