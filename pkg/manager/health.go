package manager

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// health serves /healthz (the process works: every liveness check passes)
// and /readyz (it may take traffic: caches synced and readiness checks pass).
type health struct {
	informersSynced atomic.Bool

	mu       sync.Mutex
	liveness map[string]func() error
}

func newHealth() *health {
	return &health{liveness: map[string]func() error{}}
}

// addLiveness adds a check to /healthz (and so to /readyz).
func (h *health) addLiveness(name string, check func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.liveness[name] = check
}

func (h *health) handler() http.Handler {
	mux := http.NewServeMux()
	// /healthz/ping answers as long as the process serves HTTP: the
	// Deployment's liveness probe, so a bad certificate rotation (reported
	// by /healthz and /readyz) takes a replica out of the webhook Service
	// without restart loops; the last good certificate keeps serving.
	mux.HandleFunc("/healthz/ping", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, nil)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, h.checks(false))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, h.checks(true))
	})
	return mux
}

// checks returns the named checks of /healthz, or of /readyz when ready.
func (h *health) checks(ready bool) map[string]func() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]func() error{}
	for n, c := range h.liveness {
		out[n] = c
	}
	if ready {
		out["informers"] = func() error {
			if !h.informersSynced.Load() {
				return fmt.Errorf("informer caches have not synced yet")
			}
			return nil
		}
	}
	return out
}

// serve answers 200 "ok" when every check passes, else 503 with one line
// per failed check.
func (h *health) serve(w http.ResponseWriter, checks map[string]func() error) {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	var failed []string
	for _, n := range names {
		if err := checks[n](); err != nil {
			failed = append(failed, fmt.Sprintf("[-]%s failed: %v", n, err))
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(failed, "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}

// typeNames turns a WaitForCacheSync result into names for logging.
func typeNames(res map[reflect.Type]bool) map[string]bool {
	out := make(map[string]bool, len(res))
	for t, ok := range res {
		out[t.String()] = ok
	}
	return out
}
