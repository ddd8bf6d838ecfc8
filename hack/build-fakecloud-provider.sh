#!/usr/bin/env bash
# Builds the fake cloud's Terraform/OpenTofu provider
# (hack/tools/fakecloud-provider, its own Go module) into a provider mirror
# laid out as OpenTofu's filesystem_mirror reads it (unpacked):
#
#   MIRROR/captf.local/captf/fakecloud/VERSION/linux_amd64/terraform-provider-fakecloud_vVERSION
#
# hack/build-e2e-images.sh puts that tree at /captf/providers in the drift
# module's image (SPEC O10: the runner uses it as the provider mirror);
# test/tofu's drift test runs this script for a mirror of its own.
# Built every time, like bin/captf-images: the Go cache makes a rebuild a
# few seconds, so the provider follows its sources. Static (CGO_ENABLED=0),
# -trimpath and no VCS stamp, so the same sources give the same binary (and
# the image the same digest: not imported again).
#
#   hack/build-fakecloud-provider.sh MIRROR     build into MIRROR
#   hack/build-fakecloud-provider.sh --version  print the provider's version
set -euo pipefail

# The version the module test/e2e/module-drift requires.
version=0.1.0
if [[ "${1:-}" == "--version" ]]; then
  echo "${version}"
  exit 0
fi
mirror=${1:?usage: hack/build-fakecloud-provider.sh MIRROR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="${mirror}/captf.local/captf/fakecloud/${version}/linux_amd64"
mkdir -p "${dir}"
start=${SECONDS}
(cd "${root}/hack/tools/fakecloud-provider" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 \
  go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${version}" \
  -o "${dir}/terraform-provider-fakecloud_v${version}" .)
echo ">> built the fakecloud provider ${version} in $((SECONDS - start))s" >&2
