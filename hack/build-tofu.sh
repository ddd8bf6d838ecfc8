#!/usr/bin/env bash
# Builds OpenTofu (bin/tofu) from the Go module proxy, at the version pinned in
# hack/tools/tofu/go.mod: a static binary (CGO_ENABLED=0) for the test module
# and the end-to-end test (issue 12). Like hack/build-control-plane.sh, a binary
# already built for the pinned version is kept: bin/.tofu.version records it.
# See docs/runtime-environment.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/progress.sh
source "${root}/hack/lib/progress.sh"
bin="${root}/bin"
mkdir -p "${bin}"
build_lock tofu

version=$(cd "${root}/hack/tools/tofu" && go list -m -f '{{.Version}}' github.com/opentofu/opentofu)
stamp="${bin}/.tofu.version"
if [[ -x "${bin}/tofu" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
  exit 0
fi

echo ">> building tofu (${version}); the first build takes minutes, later ones hit the Go cache" >&2
start=${SECONDS}
# version.dev=no: without it OpenTofu calls itself "<version>-dev" (its own
# release builds set the same flag, see opentofu's .goreleaser.yaml).
# The stamp goes first and comes back last, so an interrupted build is never
# taken for a finished one.
rm -f "${stamp}"
CGO_ENABLED=0 progress tofu "${root}/hack/tools/tofu" go build -v -trimpath \
  -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
  -o "${bin}/tofu" github.com/opentofu/opentofu/cmd/tofu
echo "${version}" >"${stamp}"
echo ">> built tofu in $((SECONDS - start))s" >&2
