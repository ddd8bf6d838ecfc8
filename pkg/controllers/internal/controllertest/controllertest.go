// Package controllertest holds what the controllers' unit-test fixtures
// share: queue assertions on the fake clock, event-reason parsing for a
// FakeRecorder's events, and the X1 scan of everything a test saw for a
// credential value.
package controllertest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/captf/captf/pkg/controllers/loop"
)

// RequireRequeuedAfter asserts that key was put back on q with delay d on
// clk (the queue's fake clock), not sooner: q is empty now and one
// millisecond before d, and holds key once d has passed. It takes key out.
func RequireRequeuedAfter(t testing.TB, q loop.Queue, clk *clocktesting.FakeClock, key cache.ObjectName, d time.Duration) {
	t.Helper()
	require.Zero(t, q.Len(), "requeued at once, not after %s", d)
	clk.Step(d - time.Millisecond)
	// The delaying queue moves ready items on its own goroutine; give it
	// a moment to (wrongly) do so before checking it did not.
	time.Sleep(20 * time.Millisecond)
	require.Zero(t, q.Len(), "requeued before %s", d)
	clk.Step(time.Millisecond)
	RequireQueued(t, q, key)
}

// RequireNothingQueued asserts that q is empty and stays empty however far
// clk moves: nothing was put back, not even after a delay.
func RequireNothingQueued(t testing.TB, q loop.Queue, clk *clocktesting.FakeClock, msg string) {
	t.Helper()
	require.Zero(t, q.Len(), msg)
	clk.Step(24 * time.Hour)
	time.Sleep(20 * time.Millisecond)
	require.Zero(t, q.Len(), msg)
}

// RequireQueued waits until q holds an item, takes it out, and asserts it
// is key.
func RequireQueued(t testing.TB, q loop.Queue, key cache.ObjectName) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for q.Len() == 0 {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %v in the queue", key)
		}
		time.Sleep(time.Millisecond)
	}
	got, _ := q.Get()
	q.Done(got)
	require.Equal(t, key, got)
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
