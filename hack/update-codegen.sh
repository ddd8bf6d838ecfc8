#!/usr/bin/env bash
# Regenerates everything generated from pkg/apis: deepcopy and register code
# (in the API package), the typed clientset, listers and informers
# (pkg/generated), and the CRD YAML (manifests/crds) from the kubebuilder
# markers. Set CAPTF_CODEGEN_ROOT to write into a copy of the tree instead
# (hack/verify-codegen.sh does).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${CAPTF_CODEGEN_ROOT:-${root}}
module=github.com/captf/captf

# The code generators come from the k8s.io/code-generator version in go.mod.
codegen_dir=$(cd "${root}" && go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z "${codegen_dir}" || ! -f "${codegen_dir}/kube_codegen.sh" ]]; then
  (cd "${root}" && go mod download k8s.io/code-generator)
  codegen_dir=$(cd "${root}" && go list -m -f '{{.Dir}}' k8s.io/code-generator)
fi
# kube_codegen.sh installs the generators with `go install`; keep them out of
# the user's GOBIN.
export GOBIN="${root}/bin/codegen"
mkdir -p "${GOBIN}"
export PATH="${GOBIN}:${PATH}"
source "${codegen_dir}/kube_codegen.sh"

cd "${out}"
boilerplate="${root}/hack/boilerplate.go.txt"

kube::codegen::gen_helpers --boilerplate "${boilerplate}" "${out}/pkg/apis"
kube::codegen::gen_register --boilerplate "${boilerplate}" "${out}/pkg/apis"
kube::codegen::gen_client \
  --with-watch \
  --output-dir "${out}/pkg/generated" \
  --output-pkg "${module}/pkg/generated" \
  --boilerplate "${boilerplate}" \
  "${out}/pkg/apis"

# CRDs from markers; controller-gen is a generator only (hack/tools/controller-gen).
if [[ ! -x "${root}/bin/controller-gen" ]]; then
  (cd "${root}/hack/tools/controller-gen" && go build -o "${root}/bin/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
fi
"${root}/bin/controller-gen" crd paths="./pkg/apis/..." output:crd:artifacts:config="${out}/manifests/crds"
