#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: repeatable whatever else the
# machine is doing, so a change's effect shows without noise (BENCHMARKS.md, "Instructions").
#
#   benches/callgrind.sh [requests, default 2000]
#
# Runs the release psp-gateway under callgrind with instrumentation off, warms up, then counts
# exactly the instructions of `requests` requests (oha, 1 connection, keep-alive) for:
#   1. the gateway: mTLS, `valid` PSP, GET /v1/accounts proxied to a small nginx upstream;
#   2. the check endpoint: GET /v1/psp/eidas, the same certificate again (cached answer).
# Everything the process runs meanwhile counts (every thread: TLS, hyper, the check, logging,
# the upstream client), nothing of the upstream or of oha (other processes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
requests="${1:-2000}"
work="$root/target/callgrind"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"

if ! need valgrind || ! need nginx; then apt_install valgrind nginx-light; fi
need oha || cargo install --locked oha
cargo build --release --locked --quiet --bin psp-gateway

nginx_conf ""
nginx -c "$work/nginx.conf" -p "$work" &
started $!
gateway_config 8080 8443 9090 >"$work/gateway.toml"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.out.%p" \
  ./target/release/psp-gateway serve --config "$work/gateway.toml" >"$work/logs/gateway.log" 2>&1 &
gateway_pid=$!
started "$gateway_pid"
wait_port 18080
# Under valgrind the service starts some 50 times slower.
wait_port 8443 1200
wait_port 8080

api=("${api_headers[@]}" "http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX")
gw=("${tls[@]}" https://127.0.0.1:8443/v1/accounts)

# count NAME OHA_ARGS...: instructions per request of `requests` requests.
count() {
  local name=$1
  shift
  oha --no-tui -c 1 -n 50 "$@" >/dev/null # warm-up: caches, connection, allocator
  callgrind_control -z "$gateway_pid" >/dev/null
  callgrind_control -i on "$gateway_pid" >/dev/null
  oha --no-tui -c 1 -n "$requests" --output-format json "$@" >"$work/$name.json"
  callgrind_control -i off "$gateway_pid" >/dev/null
  callgrind_control -d "$name" "$gateway_pid" >/dev/null
  sleep 1
  python3 - "$work/$name.json" "$requests" "$name" "$work" <<'PY'
import glob, json, os, sys
path, requests, name, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
codes = json.load(open(path)).get("statusCodeDistribution", {})
if codes != {"200": requests}:
    sys.exit(f"{name}: expected {requests} answers 200, got {codes}")
total = 0
for f in glob.glob(os.path.join(work, "callgrind.out.*")):
    text = open(f).read()
    if f"desc: Trigger: dump {name}\n" not in text:
        continue
    for line in text.splitlines():
        if line.startswith("totals:"):
            total = max(total, int(line.split()[1]))
if not total:
    sys.exit(f"{name}: no callgrind dump found")
print(f"| {name} | {requests} | {total:,} | {total / requests:,.0f} |")
PY
}
{
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'), \`benches/callgrind.sh $requests\`, valgrind $(valgrind --version | cut -d- -f2)."
  echo
  echo "| path | requests | instructions | per request |"
  echo "|---|---|---|---|"
  count gateway-keepalive "${gw[@]}"
  count endpoint-cached "${api[@]}"
} | tee "$work/table.md"

# Into BENCHMARKS.md, between the markers.
between_markers callgrind "$work/table.md"
