//go:build tools

// Package tools records the controller-gen command. It is never compiled.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
