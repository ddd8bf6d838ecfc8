# Sourced by the hack/build-*.sh scripts.
#
# progress <name> <dir> <command...> runs the command (a `go build -v ...`)
# in dir and, while it runs, prints once a minute how long it has taken and
# how many packages it has compiled so far (the -v lines): on a fresh
# machine the first build of kube-apiserver or terraform takes many
# minutes, and a silent terminal looks like a hang. The command's output is
# shown only when it fails (it is the compiler's error then).
progress() {
  local name=$1 dir=$2
  shift 2
  local log pid start=${SECONDS} rc=0
  log=$(mktemp "${TMPDIR:-/tmp}/captf-build-log.XXXXXX")
  (cd "${dir}" && exec "$@") 2>"${log}" &
  pid=$!
  # A background job of a script ignores SIGINT: pass Ctrl-C on.
  trap 'kill "${pid}" 2>/dev/null; rm -f "${log}"; exit 130' INT TERM
  while kill -0 "${pid}" 2>/dev/null; do
    local i
    for ((i = 0; i < 60; i++)); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 1
    done
    if kill -0 "${pid}" 2>/dev/null; then
      echo ">> still building ${name}: $((SECONDS - start))s so far, $(grep -vcE '^(#|go: )' "${log}" || true) packages compiled" >&2
    fi
  done
  wait "${pid}" || rc=$?
  trap - INT TERM
  if ((rc != 0)); then
    cat "${log}" >&2
  fi
  rm -f "${log}"
  return "${rc}"
}

# build_lock <name> holds an exclusive lock on bin/.<name>.lock until the
# script exits. make test runs the integration and end-to-end suites side
# by side (make -j2), and both need some of the same tools: a second build
# of one waits for the first, then finds its stamp and builds nothing, so
# nobody builds twice or runs a binary while it is being written.
build_lock() {
  exec {build_lock_fd}>"${bin}/.$1.lock"
  flock "${build_lock_fd}"
}
