// Package faultkit holds the helpers of the fault-injection and soak suites
// (test/faults/..., test/soak) and of the benchmark (test/bench): a parser
// for the manager's Prometheus /metrics, a process's resident memory read
// from /proc, a flaky TLS reverse proxy that stands between the manager and
// kube-apiserver and fails a share of requests, and a bounded parallel
// loop. It has no dependency on the test framework, so programs can use it
// too.
package faultkit
