// Package oci stands in for Terraform's "oci" state backend, a nested module of
// github.com/hashicorp/terraform that the Go module proxy does not serve (see
// hack/tools/terraform/go.mod). Terraform's backend registry imports it by
// this path; here it only says that this build lacks it. captf's tests use
// the kubernetes backend.
package oci

import (
	"errors"

	"github.com/hashicorp/terraform/internal/backend"
	"github.com/hashicorp/terraform/internal/backend/backendbase"
	"github.com/hashicorp/terraform/internal/configs/configschema"
	"github.com/hashicorp/terraform/internal/states/statemgr"
	"github.com/hashicorp/terraform/internal/tfdiags"
	"github.com/zclconf/go-cty/cty"
)

var errMissing = errors.New(`the "oci" backend is not part of this Terraform build (captf's hack/build-terraform.sh)`)

// New returns a backend that refuses to be configured.
func New() backend.Backend {
	return missing{Base: backendbase.Base{Schema: &configschema.Block{}}}
}

type missing struct {
	backendbase.Base
}

func (missing) Configure(cty.Value) tfdiags.Diagnostics {
	var diags tfdiags.Diagnostics
	return diags.Append(errMissing)
}

func (missing) StateMgr(string) (statemgr.Full, error) { return nil, errMissing }

func (missing) DeleteWorkspace(string, bool) error { return errMissing }

func (missing) Workspaces() ([]string, error) { return nil, errMissing }
