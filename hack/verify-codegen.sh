#!/usr/bin/env bash
# Fails when anything generated from pkg/apis (deepcopy, register, clientset,
# listers, informers, CRD YAML) is stale: regenerates into a temporary copy
# of the tree and diffs it against the working tree.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

mkdir -p "${tmp}/pkg" "${tmp}/manifests"
cp "${root}/go.mod" "${root}/go.sum" "${tmp}/"
cp -a "${root}/pkg/apis" "${root}/pkg/generated" "${tmp}/pkg/"
cp -a "${root}/manifests/crds" "${tmp}/manifests/"

CAPTF_CODEGEN_ROOT="${tmp}" "${root}/hack/update-codegen.sh" >/dev/null

status=0
for d in pkg/apis pkg/generated manifests/crds; do
  if ! diff -Nru "${root}/${d}" "${tmp}/${d}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "verify-codegen: generated code is stale; run hack/update-codegen.sh and commit the result" >&2
  exit 1
fi
echo "verify-codegen: generated code is up to date"
