//go:build tools

// Package tools records code generators the project runs from its own go.mod,
// so that their versions are pinned with the libraries they generate for.
package tools

import _ "k8s.io/code-generator"
