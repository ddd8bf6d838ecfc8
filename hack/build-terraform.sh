#!/usr/bin/env bash
# Builds HashiCorp Terraform (bin/terraform) from the Go module proxy, at the
# version pinned in hack/tools/terraform/go.mod: a static binary
# (CGO_ENABLED=0) for test/tofu, which runs the same modules with Terraform and
# with OpenTofu (SPEC K6, issue 21). Like hack/build-tofu.sh, a binary already
# built for the pinned version is kept: bin/.terraform.version records it.
# See docs/local-control-plane.md.
#
# bin/ may be shared by several checkouts: the binary is built in a temporary
# directory and moved into bin/ (a rename when both are on one filesystem),
# then the stamp likewise, so nobody ever runs a half-written binary or takes
# an interrupted build for a finished one. Nothing in bin/ is deleted.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/progress.sh
source "${root}/hack/lib/progress.sh"
bin="${root}/bin"
mkdir -p "${bin}"
build_lock terraform

version=$(cd "${root}/hack/tools/terraform" && go list -m -f '{{.Version}}' github.com/hashicorp/terraform)
stamp="${bin}/.terraform.version"
if [[ -x "${bin}/terraform" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
  exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/captf-terraform.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

echo ">> building terraform (${version}); the first build takes many minutes, later ones hit the Go cache" >&2
start=${SECONDS}
# version.dev=no: without it Terraform calls itself "<version>-dev"; its own
# release builds set the same flag (BUILDING.md, .github/scripts/
# get_product_version.sh in the module) together with -trimpath.
CGO_ENABLED=0 progress terraform "${root}/hack/tools/terraform" go build -v -trimpath \
  -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" \
  -o "${tmp}/terraform" github.com/hashicorp/terraform
echo "${version}" >"${tmp}/.terraform.version"
mv -f "${tmp}/terraform" "${bin}/terraform"
mv -f "${tmp}/.terraform.version" "${stamp}"
echo ">> built terraform in $((SECONDS - start))s" >&2
