#!/usr/bin/env bash
# How psp-gateway scales from one worker thread to two (issue 28, section 4), on loopback
# only, bounded in time:
#
#   benches/scaling.sh [seconds per run, default 8]
#
# Two configurations, each run twice (A/B/A/B), for the keep-alive mTLS gateway path and the
# cached check endpoint:
#   1 worker:  TOKIO_WORKER_THREADS=1, the gateway and the upstream on core 0, oha on core 1
#              (as benches/load.sh);
#   2 workers: TOKIO_WORKER_THREADS=2, the gateway, the upstream and oha all on cores 0 and 1:
#              the load generator and the upstream take their share of both cores, so this
#              is a lower bound of what two cores give the gateway alone.
# For each: requests per second, p99, and the gateway's CPU time per request (utime + stime
# from /proc), from which the requests one core sustains follow (1 s / CPU per request).
# Writes the table between the `scaling:begin` and `scaling:end` markers of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs="${1:-8}"
conns=16
work="$root/target/scaling"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"

[ "$(nproc)" -ge 2 ] || { echo "this comparison needs 2 cores" >&2; exit 2; }
if ! need nginx; then apt_install nginx-light; fi
need oha || cargo install --locked oha
cargo build --release --locked --quiet --bin psp-gateway

nginx_conf ""
gateway_config 8080 8443 9090 >"$work/gateway.toml"
endpoint="http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_hz=$(getconf CLK_TCK)

# start WORKERS CORES: the upstream and the gateway on CORES, the gateway with WORKERS
# worker threads; sets $gateway_pid and $upstream_pid.
start() {
  taskset -c "$2" nginx -c "$work/nginx.conf" -p "$work" &
  upstream_pid=$!
  TOKIO_WORKER_THREADS=$1 taskset -c "$2" ./target/release/psp-gateway serve \
    --config "$work/gateway.toml" >"$work/logs/gateway-$1.log" 2>&1 &
  gateway_pid=$!
  for port in 18080 8443 8080; do wait_port "$port"; done
  # The endpoint's credential verified once (argon2), before the load.
  curl -sf -u sandbox:sandbox -H 'fi_reference_id: LOAD-1' -H "eidas: $eidas" "$endpoint" >/dev/null
}
stop() {
  kill -TERM "$gateway_pid" "$upstream_pid"
  wait "$gateway_pid" "$upstream_pid" 2>/dev/null || true
}

# run NAME CORES OHA_ARGS...: appends "name rps p50_ms p99_ms cpu_us_per_request" to
# $work/runs (benches/runs.py).
run() {
  local name=$1 cores=$2
  shift 2
  local before after
  before=$(cpu_ticks "$gateway_pid")
  taskset -c "$cores" oha --no-tui --output-format json -z "${secs}s" -c "$conns" "$@" \
    >"$work/$name.json"
  after=$(cpu_ticks "$gateway_pid")
  # "name rps p50 p99 cpu": the table reads rps, p99 and cpu.
  python3 "$root/benches/runs.py" line "$work/$name.json" "$name" 200 "$tick_hz" \
    "$((after - before))" >>"$work/runs"
  tail -1 "$work/runs"
}

: >"$work/runs"
for round in 1 2; do
  start 1 0
  run "keepalive-1-$round" 1 "${tls[@]}" https://127.0.0.1:8443/v1/accounts
  run "endpoint-1-$round" 1 "${api_headers[@]}" "$endpoint"
  stop
  start 2 0,1
  run "keepalive-2-$round" 0,1 "${tls[@]}" https://127.0.0.1:8443/v1/accounts
  run "endpoint-2-$round" 0,1 "${api_headers[@]}" "$endpoint"
  stop
done

PYTHONPATH="$root/benches" python3 - "$work/runs" "$secs" >"$work/table.md" <<'PY'
import sys
import runs as r
mean = r.means(sys.argv[1])
print(f"{r.ran(f'benches/scaling.sh {sys.argv[2]}')} {sys.argv[2]} s per run, 16 connections, "
      "means of two rounds.\n")
print("| path | workers (cores) | requests/s | p99, ms | CPU per request, µs | one core sustains, requests/s | 2 workers / 1 |")
print("|---|---|---|---|---|---|---|")
for path, label in (("keepalive", "keep-alive mTLS gateway"), ("endpoint", "cached `/v1/psp/eidas`")):
    one = mean(f"{path}-1", 0)
    for w, cores in (("1", "1 worker (core 0; oha on core 1)"), ("2", "2 workers (cores 0-1, shared with oha and the upstream)")):
        rps, p99, cpu = (mean(f"{path}-{w}", i) for i in (0, 2, 3))
        ratio = f"{rps / one:.2f}×" if w == "2" else ""
        print(f"| {label} | {cores} | {rps:,.0f} | {p99:.2f} | {cpu:.1f} | {1e6 / cpu:,.0f} | {ratio} |")
PY
cat "$work/table.md"
between_markers scaling "$work/table.md"
echo "written: BENCHMARKS.md (scaling:begin..scaling:end)"
