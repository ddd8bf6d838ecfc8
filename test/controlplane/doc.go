// Package controlplane runs a real etcd, kube-apiserver and (optionally)
// kube-controller-manager on 127.0.0.1 from the binaries that
// hack/build-control-plane.sh builds into bin/. The integration tests,
// the benchmark and hack/local-up.sh all start their cluster through it, so
// there is one description of how the control plane is configured
// (docs/local-control-plane.md).
//
// Every process gets free ports, its own directory and log file, and is
// killed with its parent (Pdeathsig), so an interrupted run leaves nothing
// behind.
package controlplane
