//go:build tools

// Package tools records the Cluster API commands this module builds
// (hack/build-capi.sh), so that go mod tidy keeps their dependencies. It is
// never compiled.
package tools

import (
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/core"
)
