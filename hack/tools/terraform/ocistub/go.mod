// A stand-in for Terraform's "oci" state backend (see ../go.mod): the Go
// module proxy serves no version of that nested module.
module github.com/hashicorp/terraform/internal/backend/remote-state/oci

go 1.24.5

require github.com/hashicorp/terraform v1.13.3
