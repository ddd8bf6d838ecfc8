//go:build tools

// Package tools records the OpenTofu command this module builds
// (hack/build-tofu.sh). It is never compiled.
package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
