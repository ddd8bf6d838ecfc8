#!/usr/bin/env bash
# captf as a provider clusterctl installs (SPEC K10; docs/deploy.md, "With
# clusterctl"). Two outputs, both generated, never committed (out/ is
# git-ignored):
#
#   hack/clusterctl-repository.sh --release DIR     (make release-manifests)
#     captf's release assets, flat in DIR: infrastructure-components.yaml
#     rendered from clusterctl/kustomization.yaml (manifests/ plus the
#     webhook's cert-manager Certificate, every object labelled
#     cluster.x-k8s.io/provider: infrastructure-terraform), metadata.yaml,
#     cluster-template*.yaml and clusterclass-*.yaml from clusterctl/.
#
#   hack/clusterctl-repository.sh --repository DIR  (make clusterctl-repository)
#     a local clusterctl repository with which `clusterctl init
#     --infrastructure terraform` and `clusterctl generate cluster` run with
#     no network at all, and DIR/clusterctl.yaml naming it:
#       DIR/infrastructure-terraform/<RELEASE_VERSION>/   the release assets
#       DIR/cluster-api/<v>/, DIR/bootstrap-kubeadm/<v>/,
#       DIR/control-plane-kubeadm/<v>/   Cluster API's core and kubeadm
#         providers, rendered from their config/ in the Cluster API module
#         pinned by hack/tools/capi (the version bin/clusterctl is built at)
#       DIR/cert-manager/<v>/cert-manager.yaml   cert-manager's CRDs only,
#         from its module at the version clusterctl installs by default (see
#         below)
#
#   hack/clusterctl-repository.sh --download       (make clusterctl-modules)
#     only downloads the Go modules the two others use (the renderer's,
#     Cluster API's, cert-manager's), so that they, and
#     test/integration/clusterctl which runs --repository, need no network;
#     make test-integration runs it first.
#
# Only Go is needed: the kustomizations are rendered by hack/tools/kustomize,
# the kustomize library kubectl embeds, built into a temporary directory.
#
# cert-manager: clusterctl init first makes sure cert-manager's API answers
# (it creates an Issuer and a Certificate in a namespace cert-manager-test
# and deletes them); when it does not, it installs cert-manager from
# `cert-manager.url` in its configuration (by default a download), then
# waits for that. Its controllers are not published as Go modules, so they
# cannot be built here; the repository's cert-manager.yaml holds the CRDs
# of that release, which is what clusterctl's check needs and what lets
# captf's Issuer and Certificate be stored. Nothing issues the certificate:
# a management cluster that runs the manager needs the real cert-manager
# (point cert-manager.url at its release file, or install it first).
#
# Variables: RELEASE_VERSION (default v0.1.0; its major.minor must be a
# release series of clusterctl/metadata.yaml) and IMAGE (default
# ghcr.io/captf/captf:latest), the manager's image and the default of the
# components' variable CAPTF_MANAGER_IMAGE (--runner-image).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
release_version=${RELEASE_VERSION:-v0.1.0}
image=${IMAGE:-ghcr.io/captf/captf:latest}
provider_label=infrastructure-terraform

usage() {
  echo "usage: $0 --release DIR | --repository DIR | --download" >&2
  exit 2
}
mode=${1:-}
case "${mode}" in
  --release | --repository) [[ $# == 2 ]] || usage ;;
  --download) [[ $# == 1 ]] || usage ;;
  *) usage ;;
esac
out=${2:-}

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

# Cluster API's module at the pinned version (hack/tools/capi, as
# hack/build-capi.sh builds bin/clusterctl), and the version of cert-manager
# that clusterctl installs by default: the repository's, not the release's.
if [[ "${mode}" != --release ]]; then
  capi_tools="${root}/hack/tools/capi"
  (cd "${capi_tools}" && go mod download sigs.k8s.io/cluster-api)
  capi_version=$(cd "${capi_tools}" && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  capi_dir=$(cd "${capi_tools}" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
  cm_version=$(sed -n 's/^[[:space:]]*CertManagerDefaultVersion = "\(v[^"]*\)"$/\1/p' \
    "${capi_dir}/cmd/clusterctl/client/config/cert_manager_client.go")
  if [[ -z "${cm_version}" ]]; then
    echo "cannot find clusterctl's default cert-manager version in ${capi_dir}/cmd/clusterctl/client/config/cert_manager_client.go" >&2
    exit 1
  fi
fi

# cert_manager_dir: cert-manager's module (its CRDs are in deploy/crds).
cert_manager_dir() {
  (cd "${tmp}" && go mod download -json "github.com/cert-manager/cert-manager@${cm_version}") |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

if [[ "${mode}" == --download ]]; then
  (cd "${root}/hack/tools/kustomize" && go mod download)
  dir=$(cert_manager_dir)
  [[ -d "${dir}/deploy/crds" ]] || { echo "cert-manager ${cm_version}: no deploy/crds in its module" >&2; exit 1; }
  echo ">> modules of the renderer, Cluster API ${capi_version} and cert-manager ${cm_version} downloaded" >&2
  exit 0
fi

# The release series (major.minor) must be one metadata.yaml declares:
# clusterctl refuses the version otherwise.
if [[ ! "${release_version}" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+([-+].*)?$ ]]; then
  echo "RELEASE_VERSION ${release_version} is not vMAJOR.MINOR.PATCH" >&2
  exit 1
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
if ! awk -v maj="${major}" -v min="${minor}" '
    /- major:/ {m = $3} /minor:/ && m == maj && $2 == min {found = 1} END {exit !found}' \
    "${root}/clusterctl/metadata.yaml"; then
  echo "clusterctl/metadata.yaml has no release series ${major}.${minor} for RELEASE_VERSION ${release_version}" >&2
  exit 1
fi

start=${SECONDS}
(cd "${root}/hack/tools/kustomize" && CGO_ENABLED=0 go build -trimpath -o "${tmp}/kustomize" .)
echo ">> kustomize renderer built in $((SECONDS - start))s" >&2

# write FILE: standard input into FILE through a temporary file, so an
# interrupted run never leaves half a file behind.
write() {
  mkdir -p "$(dirname "$1")"
  cat >"$1.tmp"
  mv "$1.tmp" "$1"
}

# release DIR: captf's release assets into DIR.
release() {
  local dir=$1
  mkdir -p "${dir}"
  "${tmp}/kustomize" "${root}/clusterctl" |
    sed -e "s|^\( *image: \)ghcr.io/captf/captf:latest\$|\1${image}|" \
      -e "s|\${CAPTF_MANAGER_IMAGE:=ghcr.io/captf/captf:latest}|\${CAPTF_MANAGER_IMAGE:=${image}}|" |
    write "${dir}/infrastructure-components.yaml"
  if [[ "$(grep -c "^ *image: ${image}\$" "${dir}/infrastructure-components.yaml")" != 1 ||
    "$(grep -c -F -- "--runner-image=\${CAPTF_MANAGER_IMAGE:=${image}}" "${dir}/infrastructure-components.yaml")" != 1 ]]; then
    echo "infrastructure-components.yaml: the manager's image or --runner-image is not ${image}" >&2
    exit 1
  fi
  # Every object carries the provider label (K10): count objects and labels.
  local objects labelled
  objects=$(grep -c '^kind:' "${dir}/infrastructure-components.yaml")
  labelled=$(grep -c "^    cluster.x-k8s.io/provider: ${provider_label}\$" "${dir}/infrastructure-components.yaml")
  if [[ "${objects}" != "${labelled}" ]]; then
    echo "infrastructure-components.yaml: ${objects} objects but ${labelled} provider labels" >&2
    exit 1
  fi
  write "${dir}/metadata.yaml" <"${root}/clusterctl/metadata.yaml"
  local f
  for f in "${root}"/clusterctl/templates/*.yaml; do
    write "${dir}/$(basename "${f}")" <"${f}"
  done
  echo ">> ${dir}: infrastructure-components.yaml (${objects} objects), metadata.yaml, $(cd "${root}/clusterctl/templates" && echo *.yaml)" >&2
}

if [[ "${mode}" == --release ]]; then
  release "${out}"
  exit 0
fi

mkdir -p "${out}"
out=$(cd "${out}" && pwd)
release "${out}/${provider_label}/${release_version}"

# Its release images, as its release build sets them (the config names the
# staging image of its main branch).
capi_component() {
  local label=$1 config=$2 file=$3
  "${tmp}/kustomize" "${capi_dir}/${config}" |
    sed "s|gcr.io/k8s-staging-cluster-api/\([a-z-]*\):main|registry.k8s.io/cluster-api/\1:${capi_version}|g" |
    write "${out}/${label}/${capi_version}/${file}"
  write "${out}/${label}/${capi_version}/metadata.yaml" <"${capi_dir}/metadata.yaml"
}
capi_component cluster-api core/config/default core-components.yaml
capi_component bootstrap-kubeadm bootstrap/kubeadm/config/default bootstrap-components.yaml
capi_component control-plane-kubeadm controlplane/kubeadm/config/default control-plane-components.yaml
echo ">> ${out}: Cluster API ${capi_version} core, kubeadm bootstrap and control plane" >&2

# cert-manager's CRDs at the version this clusterctl installs by default.
cm_dir=$(cert_manager_dir)
{
  echo "# cert-manager ${cm_version}: its CRDs only (deploy/crds of its Go module), no"
  echo "# controller, no webhook: clusterctl's check that cert-manager's API answers"
  echo "# passes and captf's Issuer and Certificate are stored, but nothing issues"
  echo "# the certificate (hack/clusterctl-repository.sh)."
  for f in "${cm_dir}"/deploy/crds/*.yaml; do
    echo "---"
    grep -v '^---$' "${f}"
  done
} | write "${out}/cert-manager/${cm_version}/cert-manager.yaml"

write "${out}/clusterctl.yaml" <<EOF
# clusterctl's configuration for the local repository beside it
# (hack/clusterctl-repository.sh): every provider and cert-manager from
# files, no version check, so clusterctl needs no network.
#   bin/clusterctl init --config ${out}/clusterctl.yaml --infrastructure terraform
providers:
  - name: cluster-api
    type: CoreProvider
    url: file://${out}/cluster-api/${capi_version}/core-components.yaml
  - name: kubeadm
    type: BootstrapProvider
    url: file://${out}/bootstrap-kubeadm/${capi_version}/bootstrap-components.yaml
  - name: kubeadm
    type: ControlPlaneProvider
    url: file://${out}/control-plane-kubeadm/${capi_version}/control-plane-components.yaml
  - name: terraform
    type: InfrastructureProvider
    url: file://${out}/${provider_label}/${release_version}/infrastructure-components.yaml
cert-manager:
  url: file://${out}/cert-manager/${cm_version}/cert-manager.yaml
  version: ${cm_version}
CLUSTERCTL_DISABLE_VERSIONCHECK: "true"
EOF
echo ">> ${out}/clusterctl.yaml (cert-manager ${cm_version}: CRDs only) in $((SECONDS - start))s" >&2
