//go:build tools

// Package tools records the Terraform command this module builds
// (hack/build-terraform.sh). It is never compiled.
package tools

import _ "github.com/hashicorp/terraform"
