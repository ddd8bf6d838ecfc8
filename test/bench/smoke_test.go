package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestBenchSmoke runs every scenario at CI size (smokeConfig: 100
// namespaces, 1,000 unrelated Secrets, 200 shared objects in 20
// namespaces) against a real control plane and a `captf manager`
// subprocess, and fails on incorrectness only: an object not mirrored, a
// lost or extra owner reference, a rotation that does not complete, a
// mirror write in a steady pass or a restart. It asserts no duration; the
// table is in the test log (go test -v).
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the manager")
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-15*time.Second))
		defer cancel()
	}
	cfg := smokeConfig()
	res, err := run(ctx, cfg, testLog{t})
	if res != nil {
		var table bytes.Buffer
		res.print(&table)
		t.Log(table.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures {
		t.Error(f)
	}
}

// testLog writes the benchmark's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
