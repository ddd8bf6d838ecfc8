#!/usr/bin/env bash
# Builds the images a node needs to run captf's sample and end-to-end test,
# and imports them into the node's containerd (no registry, no container
# engine; hack/tools/images, cached by digest: an image containerd already
# has is not imported again):
#
#   captf.local/captf:dev             the manager and runner image (the Dockerfile's)
#   captf.local/fakecloud:dev         the fake cloud (test/fakecloud/cmd/fakecloud)
#   captf.local/fakecloud-module:dev  a module image: OpenTofu (bin/tofu) as
#                                     /usr/local/bin/terraform, the module
#                                     test/e2e/module in /module (the working
#                                     directory the runner copies), and
#                                     /usr/local/bin/fakecloud-client
#   captf.local/fakecloud-module-upstream:dev
#                                     the same module laid out as upstream's
#                                     images are (SPEC O10): /captf/module,
#                                     OpenTofu as /captf/runtime, no
#                                     terraform on PATH
#   captf.local/fakecloud-module-drift:dev
#                                     the drift module test/e2e/module-drift
#                                     laid out as upstream's: /captf/module,
#                                     OpenTofu as /captf/runtime, and the
#                                     fakecloud provider in the provider
#                                     mirror /captf/providers (SPEC O7, O10;
#                                     hack/build-fakecloud-provider.sh)
#
#   hack/build-e2e-images.sh CONTAINERD_SOCKET
#
# Needs bin/captf-images (hack/build-control-plane.sh --node) and bin/tofu
# (hack/build-tofu.sh). See docs/local-control-plane.md, "Images".
set -euo pipefail

address=${1:?usage: hack/build-e2e-images.sh CONTAINERD_SOCKET}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="${root}/bin"
images="${bin}/captf-images"
for b in "${images}" "${bin}/tofu"; do
  [[ -x "${b}" ]] || { echo "build-e2e-images: ${b} is missing (make node-binaries tofu)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

"${images}" captf -repo "${root}" -address "${address}"
"${images}" go -repo "${root}" -pkg ./test/fakecloud/cmd/fakecloud -name captf.local/fakecloud:dev -address "${address}"
(cd "${root}" && CGO_ENABLED=0 go build -trimpath -o "${tmp}/fakecloud-client" ./test/fakecloud/cmd/fakecloud-client)
# The runner runs `terraform` from PATH (SPEC J6, --terraform's default);
# OpenTofu answers to that name as well (T8).
module_files=()
for f in "${root}"/test/e2e/module/*.tf; do
  module_files+=(-file "${f}=/module/$(basename "${f}"):0644")
done
"${images}" build -name captf.local/fakecloud-module:dev \
  -entrypoint /usr/local/bin/terraform -workdir /module \
  -file "${bin}/tofu=/usr/local/bin/terraform" \
  -file "${tmp}/fakecloud-client=/usr/local/bin/fakecloud-client" \
  "${module_files[@]}" \
  -address "${address}"
upstream_files=()
for f in "${root}"/test/e2e/module/*.tf; do
  upstream_files+=(-file "${f}=/captf/module/$(basename "${f}"):0644")
done
"${images}" build -name captf.local/fakecloud-module-upstream:dev \
  -entrypoint /captf/runtime -workdir / \
  -file "${bin}/tofu=/captf/runtime" \
  -file "${tmp}/fakecloud-client=/usr/local/bin/fakecloud-client" \
  "${upstream_files[@]}" \
  -address "${address}"
# The drift module's provider, from its own Go module (the Go cache makes a
# rebuild seconds; its first build on a fresh machine, modules downloaded,
# is in docs/local-control-plane.md, "Images").
"${root}/hack/build-fakecloud-provider.sh" "${tmp}/providers"
drift_files=()
for f in "${root}"/test/e2e/module-drift/*.tf; do
  drift_files+=(-file "${f}=/captf/module/$(basename "${f}"):0644")
done
while IFS= read -r f; do
  drift_files+=(-file "${f}=/captf/providers/${f#"${tmp}/providers/"}:0755")
done < <(find "${tmp}/providers" -type f | sort)
"${images}" build -name captf.local/fakecloud-module-drift:dev \
  -entrypoint /captf/runtime -workdir / \
  -file "${bin}/tofu=/captf/runtime" \
  "${drift_files[@]}" \
  -address "${address}"
