// Package controllertest holds what the controllers' unit-test fixtures
// share: a queue that records timed requeues, event-reason parsing for a
// FakeRecorder's events, and the X1 scan of everything a test saw for a
// credential value.
package controllertest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/controllers/loop"
)

// After is one AddAfter call.
type After struct {
	Key   cache.ObjectName
	Delay time.Duration
}

// RecordingQueue records AddAfter calls and passes them on to its queue
// (built on a fake clock by the fixture).
type RecordingQueue struct {
	loop.Queue
	mu     sync.Mutex
	afters []After
}

// AddAfter records the call and adds key after d.
func (q *RecordingQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.mu.Lock()
	q.afters = append(q.afters, After{key, d})
	q.mu.Unlock()
	q.Queue.AddAfter(key, d)
}

// AddedAfter returns the AddAfter calls so far.
func (q *RecordingQueue) AddedAfter() []After {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]After(nil), q.afters...)
}

// EventReasons turns FakeRecorder events ("Type Reason message") into
// "Type Reason".
func EventReasons(events []string) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		parts := strings.SplitN(e, " ", 3)
		out = append(out, parts[0]+" "+parts[1])
	}
	return out
}

// RequireNoSecrets fails t when any secret (a credential value, or the hash
// of one) appears in any of texts: events, condition messages, logs (X1).
func RequireNoSecrets(t testing.TB, secrets []string, texts []string) {
	t.Helper()
	for _, secret := range secrets {
		for _, s := range texts {
			if i := strings.Index(s, secret); i >= 0 {
				t.Errorf("X1: a credential value or its hash appears in %q", s[max(0, i-120):min(len(s), i+len(secret)+40)])
			}
		}
	}
}
