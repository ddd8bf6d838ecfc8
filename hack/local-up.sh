#!/usr/bin/env bash
# Runs captf on a local control plane built from Go modules: etcd,
# kube-apiserver (RBAC, token users) and kube-controller-manager, one node
# (containerd, kubelet, kube-scheduler, kube-proxy), the CRDs, the manager's
# RBAC, `captf manager` out-of-cluster as its ServiceAccount user, and
# (unless --no-sample) a sample identity and cluster whose apply Job runs.
#
#   hack/local-up.sh [--no-sample] [--consent] [--no-node] [--no-capi]   (make run)
#
# Cluster API's CRDs and core manager (built from Go modules by
# hack/build-capi.sh, SPEC K12) run beside captf, so Clusters, Machines and
# MachinePools can drive captf's objects; --no-capi (or CAPTF_CAPI=0) leaves
# them out, and captf then runs objects marked captf.io/standalone only.
#
# The node needs root and the Debian packages hack/node-prereqs.sh installs
# when missing. The images (captf, the fake cloud, the sample's module) are
# built and imported into the node's containerd; the sample's Job runs the
# module test/e2e/module against the fake cloud (test/e2e/manifests), which
# accepts only the sample identity's credential. --no-node (or
# CAPTF_NODE=0) runs the control plane alone; so does a run without root,
# saying so: the sample's Job then stays Pending. See
# docs/local-control-plane.md.
#
# The webhook requires the client certificate kube-apiserver presents to it
# (an AdmissionConfiguration, --webhook-client-ca: SPEC B14, docs/deploy.md).
#
# --consent runs the manager with --require-source-consent (SPEC C1): source
# Secrets are usable only when labelled captf.io/credential=true and listing
# the identity in captf.io/credential-identities (the sample's Secret does).
#
# Extra manager flags: CAPTF_ARGS="--sync-period=30s --v=4" hack/local-up.sh
#
# Writes .local/ (kubeconfigs, logs), touches .local/ready once everything
# answers, streams the manager's log, and on Ctrl-C or SIGTERM stops every
# process it started. See docs/local-control-plane.md.
set -euo pipefail

# A background job of a non-interactive shell starts with SIGINT ignored, and
# bash cannot trap a signal that was ignored when it started. Re-exec this
# script with SIGINT at its default (env --default-signal, GNU coreutils
# 8.31+): the trap below then stops everything on Ctrl-C or SIGINT however
# the script was started. It must stay the same process in the same process
# group, so that `kill -INT -- -PGID` (how scripts and CI stop a job tree)
# reaches it; timeout(1), used here before, moves itself into a group of its
# own, and a KILL of the caller's group then orphaned the control plane.
if [[ -z "${CAPTF_LOCAL_UP_CHILD:-}" ]] && (( 16#$(awk '/^SigIgn:/ {print $2}' /proc/$$/status) & 2 )); then
  export CAPTF_LOCAL_UP_CHILD=1
  exec env --default-signal=INT "$0" "$@"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${root}"
local_dir="${root}/.local"
bin="${root}/bin"
sample=true
consent_args=""
node=true
[[ "${CAPTF_NODE:-1}" == 0 ]] && node=false
capi=true
[[ "${CAPTF_CAPI:-1}" == 0 ]] && capi=false
for arg in "$@"; do
  case "${arg}" in
    --no-sample) sample=false ;;
    --node) node=true ;;
    --no-node) node=false ;;
    --no-capi) capi=false ;;
    --consent) consent_args="--require-source-consent" ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "local-up: unknown argument ${arg} (try --help)" >&2; exit 2 ;;
  esac
done

log() { echo "local-up: $*" >&2; }

mkdir -p "${local_dir}"
pidfile="${local_dir}/local-up.pid"
if [[ -f "${pidfile}" ]] && kill -0 "$(cat "${pidfile}")" 2>/dev/null; then
  log "already running (PID $(cat "${pidfile}")); stop it first (Ctrl-C in its terminal, or kill $(cat "${pidfile}"))."
  exit 1
fi
echo $$ >"${pidfile}"
rm -f "${local_dir}/ready"

controlplane_pid=""
manager_pid=""
tail_pid=""
cleanup() {
  trap - EXIT INT TERM
  log "stopping"
  rm -f "${local_dir}/ready"
  [[ -n "${tail_pid}" ]] && kill "${tail_pid}" 2>/dev/null || true
  [[ -n "${manager_pid}" ]] && kill "${manager_pid}" 2>/dev/null && wait "${manager_pid}" 2>/dev/null || true
  if [[ -n "${controlplane_pid}" ]]; then
    kill "${controlplane_pid}" 2>/dev/null || true
    wait "${controlplane_pid}" 2>/dev/null || true
  fi
  # Belt and braces: the control plane's own processes, by PID.
  if [[ -f "${local_dir}/controlplane.env" ]]; then
    for pid in $(grep -E '^(ETCD|KUBE_APISERVER|KUBE_CONTROLLER_MANAGER|CAPI_MANAGER)_PID=' "${local_dir}/controlplane.env" | cut -d= -f2); do
      kill -9 "${pid}" 2>/dev/null || true
    done
  fi
  rm -f "${pidfile}"
  log "stopped"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_start=${SECONDS}
log "building the control plane from Go modules (the first run takes 20-40 minutes on 2 cores; later runs reuse bin/)"
"${root}/hack/build-control-plane.sh"
capi_args=""
if ${capi}; then
  log "building Cluster API's core manager from Go modules (first run: about 10 more minutes)"
  "${root}/hack/build-capi.sh"
  capi_args="--capi"
fi
node_args=""
if ${node}; then
  if [[ "$(id -u)" != 0 ]]; then
    log "no node: it needs root (mounts, network namespaces, cgroups, a bridge). Running the control plane alone:"
    log "the sample's apply Job will stay Pending. Run as root for a node, or pass --no-node to skip this message."
    node=false
  elif "${root}/hack/node-prereqs.sh"; then
    "${root}/hack/build-control-plane.sh" --node
    "${root}/hack/build-tofu.sh"
    node_args="--node"
  else
    log "no node (see above): running the control plane alone; Jobs will stay Pending"
    node=false
  fi
fi
log "building captf"
go build -o "${bin}/captf" ./cmd/captf
go build -o "${bin}/captf-controlplane" ./test/controlplane/cmd/captf-controlplane
go build -o "${bin}/captf-probe" ./hack/probe
log "built in $((SECONDS - build_start)) s"

rm -f "${local_dir}/controlplane.env" "${local_dir}/controlplane.ready"
log "starting etcd, kube-apiserver, kube-controller-manager${capi_args:+, the Cluster API manager}"
"${bin}/captf-controlplane" --dir "${local_dir}" --bin-dir "${bin}" --crds "${root}/manifests/crds" ${node_args} ${capi_args} \
  >"${local_dir}/controlplane.log" 2>&1 &
controlplane_pid=$!
for _ in $(seq 1 240); do
  [[ -f "${local_dir}/controlplane.ready" ]] && break
  if ! kill -0 "${controlplane_pid}" 2>/dev/null; then
    log "the control plane failed to start:"; cat "${local_dir}/controlplane.log" >&2; exit 1
  fi
  sleep 0.5
done
[[ -f "${local_dir}/controlplane.ready" ]] || { log "the control plane did not become ready"; cat "${local_dir}/controlplane.log" >&2; exit 1; }
# shellcheck disable=SC1091
source "${local_dir}/controlplane.env"

kubectl=("${bin}/kubectl" --kubeconfig "${local_dir}/kubeconfig")
runner_image=ghcr.io/captf/captf:latest
if ${node}; then
  log "building the images (captf, fake cloud, sample module) into the node's containerd"
  "${root}/hack/build-e2e-images.sh" "${CONTAINERD_ADDRESS}" >&2
  runner_image=captf.local/captf:dev
fi
log "installing the manager's RBAC"
"${kubectl[@]}" apply -f manifests/manager/namespace.yaml >/dev/null
"${kubectl[@]}" apply -k manifests/rbac >/dev/null
log "installing the trust-boundary admission policy (SPEC B3)"
"${kubectl[@]}" apply -k manifests/policy >/dev/null

log "starting captf manager (extra flags: ${consent_args} ${CAPTF_ARGS:-none})"
# shellcheck disable=SC2086
"${bin}/captf" manager \
  --kubeconfig "${local_dir}/kubeconfig-manager" \
  --leader-elect=false \
  --webhook-host 127.0.0.1 --webhook-port "${MANAGER_WEBHOOK_PORT}" --webhook-cert-dir "${local_dir}/webhook" \
  --webhook-client-ca "${WEBHOOK_CLIENT_CA}" \
  --metrics-bind-address "127.0.0.1:${MANAGER_METRICS_PORT}" \
  --health-probe-bind-address "127.0.0.1:${MANAGER_HEALTH_PORT}" \
  --runner-image "${runner_image}" \
  ${consent_args} ${CAPTF_ARGS:-} >"${local_dir}/manager.log" 2>&1 &
manager_pid=$!
ready=false
for _ in $(seq 1 120); do
  if ! kill -0 "${manager_pid}" 2>/dev/null; then
    log "captf manager exited:"; tail -50 "${local_dir}/manager.log" >&2; exit 1
  fi
  if "${kubectl[@]}" get --raw / >/dev/null 2>&1 && \
     [[ "$("${bin}/captf-probe" "http://127.0.0.1:${MANAGER_HEALTH_PORT}/readyz" 2>/dev/null)" == "ok" ]]; then
    ready=true; break
  fi
  sleep 0.5
done
${ready} || { log "captf manager did not become ready:"; tail -50 "${local_dir}/manager.log" >&2; exit 1; }

log "installing the identity admission webhook (failurePolicy: Fail)"
"${kubectl[@]}" apply -f "${local_dir}/webhook-configuration.yaml" >/dev/null

sample_status=""
if ${sample} && ${node}; then
  log "applying the fake cloud and the sample (test/e2e/manifests/fakecloud.yaml, sample.yaml)"
  "${kubectl[@]}" apply -f test/e2e/manifests/fakecloud.yaml >/dev/null
  "${kubectl[@]}" apply -f test/e2e/manifests/sample.yaml >/dev/null
  log "waiting (up to 5 minutes) for the sample cluster team-a/demo: its apply Job runs OpenTofu against the fake cloud"
  if "${kubectl[@]}" -n team-a wait terraformcluster/demo --for=condition=Ready --timeout=300s >/dev/null 2>&1; then
    sample_status="The sample cluster team-a/demo is Ready: its apply Job completed."
  else
    sample_status="The sample cluster team-a/demo is NOT Ready yet: look at its conditions and its Job's log."
    log "${sample_status}"
  fi
  job=$("${kubectl[@]}" -n team-a get jobs -l captf.io/managed=true -o name 2>/dev/null | head -1)
  sample_status="
${sample_status}
  bin/kubectl --kubeconfig .local/kubeconfig -n team-a get terraformcluster demo -o yaml
  bin/kubectl --kubeconfig .local/kubeconfig -n team-a get jobs,pods
  bin/kubectl --kubeconfig .local/kubeconfig -n team-a logs ${job:-job/<name>} -c terraform   # OpenTofu's output
"
elif ${sample}; then
  log "applying the sample (manifests/samples/sample.yaml; no node: its Job stays Pending)"
  "${kubectl[@]}" apply -f manifests/samples/sample.yaml >/dev/null
fi

cat >"${local_dir}/env" <<ENV
export KUBECONFIG=${local_dir}/kubeconfig
export PATH=${bin}:\$PATH
ENV
touch "${local_dir}/ready"
cat >&2 <<MSG

local-up: ready. The API server is ${APISERVER_URL}; the admin kubeconfig is .local/kubeconfig.

  bin/kubectl --kubeconfig .local/kubeconfig get terraformclusters -A
  bin/kubectl --kubeconfig .local/kubeconfig get terraformclusteridentities
  bin/kubectl --kubeconfig .local/kubeconfig get clusters,machines -A   # Cluster API (unless --no-capi)
  source .local/env            # KUBECONFIG and bin/ on PATH for this shell
${sample_status}
Users: .local/kubeconfig-alice and .local/kubeconfig-bob have no permissions
(or use --as=alice with the admin kubeconfig). The identity webhook checks
that whoever points an identity at a Secret may read it (see README).
Manager: probes http://127.0.0.1:${MANAGER_HEALTH_PORT}/readyz; metrics over HTTPS with
a bearer token (SPEC B4; --metrics-secure=false in CAPTF_ARGS serves plain HTTP):
  curl -sk -H "Authorization: Bearer \$(bin/kubectl --kubeconfig .local/kubeconfig config view --raw -o jsonpath='{.users[0].user.token}')" https://127.0.0.1:${MANAGER_METRICS_PORT}/metrics
Logs: .local/manager.log (streamed below), ${LOG_DIR}
Ctrl-C stops everything.

MSG
tail -n +1 -F "${local_dir}/manager.log" &
tail_pid=$!
wait "${manager_pid}" || true
kill "${tail_pid}" 2>/dev/null || true
log "captf manager exited; see .local/manager.log"
exit 1
