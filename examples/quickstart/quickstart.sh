#!/usr/bin/env bash
# tether in one command: a sandbox API server, a local Git repository made from
# examples/apps/plain, and `tether serve` keeping the one in sync with the other.
# It shows the app synced, then a live change made with kubectl: it pauses tether's
# automation so the drift stays in sight (the field, both values, who changed it, and
# the dashboard showing it), then resumes it and tether heals the change.
#
#   examples/quickstart/quickstart.sh            # demo, then keeps running until Ctrl-C
#   examples/quickstart/quickstart.sh --exit     # demo, then stops (tests and CI)
#
# Needs cargo (or a built binary in $TETHER), git and kubectl. Everything it starts is
# stopped on exit, and its files live in one temporary directory under ${TMPDIR:-/tmp}.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: examples/quickstart/quickstart.sh [--keep-running | --exit]

  --keep-running  after the demo, keep the sandbox and tether serve running until
                  Ctrl-C, so you can look around (the default)
  --exit          stop everything after the demo (for tests and CI)

Environment:
  TETHER            the tether binary to use; default: build it with `cargo build`
  QUICKSTART_PAUSE  seconds to stay on the drift before tether heals it; default:
                    until Enter is pressed on a terminal, else 20; 0 does not pause
EOF
}

keep_running=1
for arg in "$@"; do
  case "$arg" in
    --keep-running) keep_running=1 ;;
    --exit) keep_running=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "quickstart: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
app=hello
namespace=demo
# How long each wait may take. The sandbox answers in milliseconds and tether serve
# reacts to live changes through a watch, so these only bound a broken run.
wait_seconds=60

say() { printf '\n==> %s\n' "$*"; }
fail() { printf '\nquickstart: %s\n' "$*" >&2; exit 1; }

for tool in git kubectl; do
  command -v "$tool" >/dev/null 2>&1 || fail "'$tool' is required and is not on the PATH"
done

dir="$(mktemp -d "${TMPDIR:-/tmp}/tether-quickstart.XXXXXX")"
sandbox_pid=""
serve_pid=""
sleep_pid=""
succeeded=0

# Stops one process this script started, by PID: SIGTERM, then SIGKILL if it is still
# there after 10 s (tether serve finishes the passes in flight first).
stop() {
  local pid="$1"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  stop "$sleep_pid"
  stop "$serve_pid"
  stop "$sandbox_pid"
  if [ "$succeeded" -eq 1 ]; then
    rm -rf "$dir"
  else
    echo "quickstart: logs kept in $dir (sandbox.log, serve.log)" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the binary ---------------------------------------------------------------------
if [ -n "${TETHER:-}" ]; then
  tether="$TETHER"
  [ -x "$tether" ] || fail "TETHER=$tether is not an executable"
else
  command -v cargo >/dev/null 2>&1 || fail "'cargo' is required to build tether (or set TETHER to a built binary)"
  say "Building tether (cargo build: the first build compiles ~400 crates, minutes on a laptop; its progress follows)"
  (cd "$root" && cargo build --bin tether)
  tether="${CARGO_TARGET_DIR:-$root/target}/debug/tether"
  case "$tether" in /*) ;; *) tether="$root/$tether" ;; esac
fi

# --- the sandbox --------------------------------------------------------------------
say "Starting the sandbox: a Kubernetes-compatible API server in memory"
kubeconfig="$dir/kubeconfig"
"$tether" sandbox --listen 127.0.0.1:0 --kubeconfig "$kubeconfig" --simulate-controllers \
  >"$dir/sandbox.out" 2>"$dir/sandbox.log" &
sandbox_pid=$!
sandbox_url=""
for _ in $(seq 1 $((wait_seconds * 10))); do
  if read -r word url <"$dir/sandbox.out" 2>/dev/null && [ "$word" = ready ]; then
    sandbox_url="$url"
    break
  fi
  kill -0 "$sandbox_pid" 2>/dev/null || fail "the sandbox exited: $(cat "$dir/sandbox.log")"
  sleep 0.1
done
[ -n "$sandbox_url" ] || fail "the sandbox did not print its ready line in ${wait_seconds}s"
export KUBECONFIG="$kubeconfig"
echo "sandbox: $sandbox_url"

# --- the Git repository -------------------------------------------------------------
say "Creating a Git repository from examples/apps/plain"
repo="$dir/repo"
mkdir -p "$repo"
cp "$root"/examples/apps/plain/*.yaml "$repo"/
git -C "$repo" init --quiet --initial-branch=main 2>/dev/null || {
  git -C "$repo" init --quiet && git -C "$repo" symbolic-ref HEAD refs/heads/main
}
git -C "$repo" add .
git -C "$repo" -c user.name=quickstart -c user.email=quickstart@tether.invalid \
  commit --quiet -m "hello-web: a ConfigMap, a Deployment and a Service"
echo "repository: $repo (commit $(git -C "$repo" rev-parse --short HEAD): $(cd "$repo" && echo *.yaml))"

# --- the namespace ------------------------------------------------------------------
# Applied from YAML: the sandbox refuses kubectl's protobuf bodies (`kubectl create
# namespace`), one of its documented differences from a real cluster.
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$namespace" |
  kubectl apply -f - >/dev/null
echo "namespace: $namespace"

# --- tether serve -------------------------------------------------------------------
# A port for the status API. tether serve listens where its configuration says (it
# cannot report a port picked by the system), so pick one nothing answers on, below
# the range the kernel hands out for port 0 and outgoing connections, and try another
# if it is taken between the check and tether serve's bind.
ephemeral_low="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
[ "$ephemeral_low" -gt 11000 ] 2>/dev/null || ephemeral_low=32768
pick_port() {
  local candidate
  for _ in $(seq 1 100); do
    candidate=$((10000 + RANDOM % (ephemeral_low - 10000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  fail "found no free port on 127.0.0.1"
}

# The status API's token (issue #24: even on loopback, a token keeps other pages the
# browser opens away from it). `tether status` reads it from TETHER_API_TOKEN; the
# dashboard asks for it once.
token_file="$dir/api-token"
(umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$token_file")
TETHER_API_TOKEN="$(cat "$token_file")"
export TETHER_API_TOKEN

write_config() {
  cat >"$config" <<EOF
# The configuration the quickstart runs tether serve with (docs/configuration.md).
server:
  listen: 127.0.0.1:$port
  apiToken: {secretFile: $token_file}
apps:
  - name: $app
    source:
      repo: file://$repo
      ref: main
      interval: 10s
    destination:
      namespace: $namespace
    sync:
      automated: true
      prune: true
      selfHeal: true
EOF
}

config="$dir/tether.yaml"
say "Starting tether serve (configuration: $config)"
for attempt in 1 2 3; do
  port="$(pick_port)"
  server="http://127.0.0.1:$port"
  write_config
  TETHER_CACHE_DIR="$dir/cache" "$tether" serve --config "$config" \
    >"$dir/serve.out" 2>"$dir/serve.log" &
  serve_pid=$!
  # Up once the status API answers (exit 0 or 1; 2 is "cannot reach").
  for _ in $(seq 1 $((wait_seconds * 4))); do
    code=0
    "$tether" status --server "$server" >/dev/null 2>&1 || code=$?
    [ "$code" -ne 2 ] && break
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.25
  done
  kill -0 "$serve_pid" 2>/dev/null && break
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
  grep -q "cannot listen" "$dir/serve.log" && [ "$attempt" -lt 3 ] && continue
  fail "tether serve exited: $(tail -n 20 "$dir/serve.log")"
done

# Waits until `tether status` exits 0: every app Synced and Healthy.
wait_synced() {
  for _ in $(seq 1 $((wait_seconds * 4))); do
    if "$tether" status --server "$server" >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$serve_pid" 2>/dev/null || fail "tether serve exited: $(tail -n 20 "$dir/serve.log")"
    sleep 0.25
  done
  "$tether" status --server "$server" >&2 || true
  fail "$app was not Synced and Healthy within ${wait_seconds}s"
}
wait_synced
"$tether" status --server "$server"
echo "synced: $app is Synced and Healthy"

# --- drift, and the heal ------------------------------------------------------------
replicas() { kubectl -n "$namespace" get deployment hello-web -o jsonpath='{.spec.replicas}'; }
desired="$(replicas)"
changed=$((desired + 3))

# A request to the status API with bash's own /dev/tcp, so the demo needs no curl.
api_post() {
  local path="$1" answer=""
  exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot reach tether serve on port $port"
  printf 'POST %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' \
    "$path" "$port" "$TETHER_API_TOKEN" >&3
  IFS= read -r answer <&3 || true
  exec 3<&- 3>&-
  case "$answer" in
    "HTTP/1.1 2"*) ;;
    *) fail "POST $path answered: ${answer:-nothing}" ;;
  esac
}

# tether serve heals a live change within a second: suspend its automation first (the
# dashboard's Suspend button), so the drift stays long enough to be seen.
say "Suspending $app's automation, so the drift stays in sight (POST /api/v1/apps/$app/suspend)"
api_post "/api/v1/apps/$app/suspend"

say "Changing the cluster behind Git's back: kubectl patch deployment hello-web"
live="$(kubectl -n "$namespace" patch deployment hello-web --type merge \
  -p "{\"spec\":{\"replicas\":$changed}}" -o jsonpath='{.spec.replicas}')"
echo "drift: kubectl set deployment/hello-web replicas to $live (Git says $desired)"

# What tether sees: `tether diff` of the same commit against the cluster names the
# field, both values and who changed it (exit 1: drift found).
say "What tether sees: tether diff --app $app --path <repository> -n $namespace"
code=0
"$tether" diff --app "$app" --path "$repo" -n "$namespace" || code=$?
[ "$code" -eq 1 ] || fail "tether diff exited $code, expected 1 (drift)"
out_of_sync=""
for _ in $(seq 1 $((wait_seconds * 4))); do
  # `tether status` exits 1 while an app is OutOfSync: read its table, not its code.
  table="$("$tether" status --server "$server" 2>/dev/null || true)"
  if grep -q "^$app  *OutOfSync" <<<"$table"; then
    out_of_sync=1
    break
  fi
  sleep 0.25
done
[ -n "$out_of_sync" ] || fail "tether serve did not report $app OutOfSync within ${wait_seconds}s"
printf '%s\n' "$table"
echo "dashboard: $server/#/apps/$app shows the drift now (OutOfSync, the field, who changed it)"

pause="${QUICKSTART_PAUSE:-}"
if [ -z "$pause" ] && [ -t 0 ]; then
  printf '\nPress Enter to resume automation and let tether heal it... '
  read -r _ || true
else
  pause="${pause:-20}"
  if [ "$pause" -gt 0 ]; then
    echo "pausing ${pause}s before tether heals it (QUICKSTART_PAUSE=0 skips this)"
    # In the background, so Ctrl-C stops the demo at once (see the end of the script).
    sleep "$pause" &
    sleep_pid=$!
    wait "$sleep_pid" || true
  fi
fi

say "Resuming $app's automation (POST /api/v1/apps/$app/resume): tether heals the drift"
api_post "/api/v1/apps/$app/resume"
healed=""
for _ in $(seq 1 $((wait_seconds * 4))); do
  now="$(replicas)"
  if [ "$now" = "$desired" ]; then
    healed="$now"
    break
  fi
  sleep 0.25
done
[ -n "$healed" ] || fail "tether did not put replicas back to $desired within ${wait_seconds}s (now $(replicas))"
echo "healed: tether set deployment/hello-web replicas back to $healed"
wait_synced
"$tether" status --server "$server"

# --- where to look ------------------------------------------------------------------
say "Where to look"
cat <<EOF
Dashboard:   $server/  (open it in a browser: apps, drift and who changed it, live)
Status API:  $server/api/v1/apps  (also /api/v1/apps/$app, /metrics, /healthz)
API token:   in $token_file (the dashboard asks for it; curl -H "Authorization: Bearer \$(cat $token_file)")
Sandbox:     $sandbox_url
kubectl:     export KUBECONFIG=$kubeconfig
             kubectl -n $namespace get deployments,services,configmaps
tether:      TETHER_API_TOKEN=\$(cat $token_file) $tether status --server $server
Git:         $repo (commit a change there; tether polls it every 10s)
Logs:        $dir/serve.log, $dir/sandbox.log
EOF

succeeded=1
if [ "$keep_running" -eq 0 ]; then
  say "Stopping (--exit): the sandbox and tether serve stop, the directory is removed"
else
  say "Running until Ctrl-C"
  # Wakes on Ctrl-C (the INT trap exits and cleanup stops both processes) or when
  # either process dies.
  while kill -0 "$serve_pid" 2>/dev/null && kill -0 "$sandbox_pid" 2>/dev/null; do
    # `wait` returns as soon as a trapped signal arrives; a foreground sleep would not.
    sleep 1 &
    sleep_pid=$!
    wait "$sleep_pid" || true
  done
  succeeded=0
  fail "a process stopped on its own; see the logs"
fi
