#!/usr/bin/env bash
# Installs what a local node needs from the host (Debian packages), when
# missing: containerd, runc, the CNI plugins, iptables (kube-proxy), and the
# tools the node's teardown uses (mount, ip: util-linux, iproute2).
#
#   hack/node-prereqs.sh           install what is missing (root required)
#   hack/node-prereqs.sh --check   only report; exit 1 when something is missing
#
# Without root it says so and exits 1, so the caller can fall back to the
# control plane alone. See docs/local-control-plane.md, "A node".
set -euo pipefail

check=false
for arg in "$@"; do
  case "${arg}" in
    --check) check=true ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "node-prereqs: unknown argument ${arg} (try --help)" >&2; exit 2 ;;
  esac
done

# package:file that proves it is installed
wanted=(
  containerd:/usr/bin/containerd
  containerd:/usr/bin/ctr
  runc:/usr/sbin/runc
  containernetworking-plugins:/usr/lib/cni/bridge
  containernetworking-plugins:/usr/lib/cni/host-local
  containernetworking-plugins:/usr/lib/cni/loopback
  iptables:/usr/sbin/iptables
  iproute2:/usr/sbin/ip
  util-linux:/usr/bin/mount
)
missing=()
for w in "${wanted[@]}"; do
  pkg=${w%%:*} file=${w#*:}
  if [[ ! -x "${file}" ]] && [[ ! " ${missing[*]} " == *" ${pkg} "* ]]; then
    missing+=("${pkg}")
  fi
done
if (( ${#missing[@]} == 0 )); then
  exit 0
fi
if ${check}; then
  echo "node-prereqs: missing Debian packages: ${missing[*]} (hack/node-prereqs.sh installs them, as root)" >&2
  exit 1
fi
if (( EUID != 0 )); then
  echo "node-prereqs: a node needs root (mounts, network namespaces, cgroups, a bridge) and the Debian packages ${missing[*]}; run as root, or use the control plane alone." >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "node-prereqs: no apt-get here; install ${missing[*]} (containerd 1.6+, runc, CNI plugins in /usr/lib/cni) by other means." >&2
  exit 1
fi
echo "node-prereqs: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: containerd recommends nothing the node needs.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian package enables and starts a system containerd on /run/containerd;
# the node runs a private one, so do not leave a second daemon running when we
# were the ones who installed it.
if command -v systemctl >/dev/null && systemctl is-active --quiet containerd 2>/dev/null; then
  echo "node-prereqs: note: a system containerd is running; the node uses its own (private root, state and socket)." >&2
fi
echo "node-prereqs: installed ${missing[*]}" >&2
