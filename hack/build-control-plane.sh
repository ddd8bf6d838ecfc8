#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) from Go modules into bin/, at the versions pinned in hack/tools/*/go.mod.
# A binary already built for the pinned version is kept: the stamp file
# bin/.<name>.version records which version it was built from.
# See docs/local-control-plane.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="${root}/bin"
mkdir -p "${bin}"

# build <dir under hack/tools> <binary name> <package> <version string>
build() {
  local dir=$1 name=$2 pkg=$3 version=$4
  local stamp="${bin}/.${name}.version"
  if [[ -x "${bin}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
    return 0
  fi
  echo ">> building ${name} (${version}); the first build takes minutes, later ones hit the Go cache" >&2
  local start=${SECONDS}
  (cd "${root}/hack/tools/${dir}" && CGO_ENABLED=0 go build -trimpath -o "${bin}/${name}" "${pkg}")
  echo "${version}" >"${stamp}"
  echo ">> built ${name} in $((SECONDS - start))s" >&2
}

kube_version=$(cd "${root}/hack/tools/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd_version=$(cd "${root}/hack/tools/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

build etcd etcd go.etcd.io/etcd/server/v3 "${etcd_version}"
build kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${kube_version}"
build kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${kube_version}"
build kube kubectl k8s.io/kubernetes/cmd/kubectl "${kube_version}"
