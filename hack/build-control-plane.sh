#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) from Go modules into bin/, at the versions pinned in hack/tools/*/go.mod.
# A binary already built for the pinned version is kept: the stamp file
# bin/.<name>.version records which version it was built from.
#
#   hack/build-control-plane.sh            the control plane (make control-plane)
#   hack/build-control-plane.sh --node     only the node: kubelet, kube-scheduler,
#                                          kube-proxy (make node-binaries)
#
# See docs/local-control-plane.md.
set -euo pipefail

node=false
for arg in "$@"; do
  case "${arg}" in
    --node) node=true ;;
    *) echo "build-control-plane: unknown argument ${arg}" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/progress.sh
source "${root}/hack/lib/progress.sh"
bin="${root}/bin"
mkdir -p "${bin}"
build_lock control-plane

# build <dir under hack/tools> <binary name> <package> <version string> [ldflags]
# The stamp is the version string; callers that pass ldflags put a marker for
# them into it, so that changing the flags rebuilds.
build() {
  local dir=$1 name=$2 pkg=$3 version=$4 ldflags=${5:-}
  local stamp="${bin}/.${name}.version"
  if [[ -x "${bin}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
    return 0
  fi
  echo ">> building ${name} (${version}); the first build takes minutes, later ones hit the Go cache" >&2
  local start=${SECONDS}
  CGO_ENABLED=0 progress "${name}" "${root}/hack/tools/${dir}" go build -v -trimpath -ldflags "${ldflags}" -o "${bin}/${name}" "${pkg}"
  echo "${version}" >"${stamp}"
  echo ">> built ${name} in $((SECONDS - start))s" >&2
}

kube_version=$(cd "${root}/hack/tools/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)

# Binaries that report their release are stamped with it: unstamped they say
# v0.0.0-master, which the kubelet puts into the Node's status, kubectl
# version cannot parse, and Cluster API's manager refuses as "unsupported
# management cluster server version" (kube-apiserver; SPEC K12).
minor=${kube_version#v*.}; minor=${minor%%.*}
major=${kube_version#v}; major=${major%%.*}
version_ldflags="-X k8s.io/component-base/version.gitVersion=${kube_version}"
version_ldflags+=" -X k8s.io/component-base/version.gitMajor=${major}"
version_ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor}"
version_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

if ${node}; then
  for cmd in kubelet kube-scheduler kube-proxy; do
    build kube "${cmd}" "k8s.io/kubernetes/cmd/${cmd}" "${kube_version}+stamped" "${version_ldflags}"
  done
  # The image builder and the pause image's binary: small, built every time
  # (the Go cache makes that a second), so they follow their sources.
  (cd "${root}/hack/tools/images" && CGO_ENABLED=0 go build -trimpath -o "${bin}/captf-images" . \
    && CGO_ENABLED=0 go build -trimpath -o "${bin}/captf-pause" ./pause)
  exit 0
fi

etcd_version=$(cd "${root}/hack/tools/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

build etcd etcd go.etcd.io/etcd/server/v3 "${etcd_version}"
# "+stamped": a kube-apiserver built before it was stamped is rebuilt once.
build kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${kube_version}+stamped" "${version_ldflags}"
build kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${kube_version}"
build kube kubectl k8s.io/kubernetes/cmd/kubectl "${kube_version}"
