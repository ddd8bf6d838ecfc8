#!/usr/bin/env bash
# Builds Cluster API's core manager (bin/capi-manager) and clusterctl
# (bin/clusterctl) from the Go module proxy, at the release pinned in
# hack/tools/capi/go.mod, and copies that release's CRDs into bin/capi-crds,
# so the tests that run Cluster API's own controllers (SPEC K12) need no
# module cache at run time. Like hack/build-control-plane.sh, what is already
# built for the pinned version is kept: bin/.<name>.version records it.
#
#   hack/build-capi.sh        (make capi-tools)
#
# See docs/local-control-plane.md, "Cluster API".
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/progress.sh
source "${root}/hack/lib/progress.sh"
bin="${root}/bin"
tools="${root}/hack/tools/capi"
mkdir -p "${bin}"
build_lock capi

version=$(cd "${tools}" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)

# up_to_date <name>: the stamp says <name> is built for this version.
up_to_date() {
  local stamp="${bin}/.$1.version"
  [[ -e "${bin}/$1" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]
}

if up_to_date capi-manager && up_to_date clusterctl && up_to_date capi-crds; then
  exit 0
fi

echo ">> Cluster API ${version}: downloading modules (once per machine)" >&2
start=${SECONDS}
(cd "${tools}" && go mod download)
echo ">> downloaded in $((SECONDS - start))s" >&2

# Cluster API reads its own version from these (clusterctl version, the
# manager's start-up log); its release builds set the same flags.
minor=${version#v*.}; minor=${minor%%.*}
major=${version#v}; major=${major%%.*}
ldflags="-X sigs.k8s.io/cluster-api/version.gitVersion=${version}"
ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMajor=${major}"
ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMinor=${minor}"
ldflags+=" -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"

# build <binary name> <package>. The stamp goes first and comes back last,
# so an interrupted build is never taken for a finished one.
build() {
  local name=$1 pkg=$2
  up_to_date "${name}" && return 0
  echo ">> building ${name} (${pkg} ${version}); the first build takes minutes, later ones hit the Go cache" >&2
  local start=${SECONDS}
  rm -f "${bin}/.${name}.version"
  CGO_ENABLED=0 progress "${name}" "${tools}" go build -v -trimpath -ldflags "${ldflags}" -o "${bin}/${name}" "${pkg}"
  echo "${version}" >"${bin}/.${name}.version"
  echo ">> built ${name} in $((SECONDS - start))s" >&2
}

build capi-manager sigs.k8s.io/cluster-api/core
build clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl

# The CRDs of the release, as its core provider installs them (without the
# kustomize patches: no conversion webhook, the tests use v1beta2 only).
if ! up_to_date capi-crds; then
  rm -f "${bin}/.capi-crds.version"
  src="$(cd "${tools}" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)/core/config/crd/bases"
  rm -rf "${bin}/capi-crds"
  mkdir -p "${bin}/capi-crds"
  cp "${src}"/*.yaml "${bin}/capi-crds/"
  chmod u+w "${bin}/capi-crds"/*.yaml
  echo "${version}" >"${bin}/.capi-crds.version"
  echo ">> copied $(ls "${bin}/capi-crds" | wc -l) Cluster API CRDs into bin/capi-crds" >&2
fi
