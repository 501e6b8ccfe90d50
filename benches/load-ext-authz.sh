#!/usr/bin/env bash
# The external authorisation faces under load (issue 28, section 3), each beside its peer in
# the same run, on loopback only, bounded in time:
#
#   benches/load-ext-authz.sh [seconds per run, default 8]
#
#   (a) Envoy ext_authz over gRPC (`[ext_authz]`, plain HTTP/2): benches/ext_authz_load.rs,
#       2 connections, the same cached decision each time: as many Checks as the face answers
#       (16 streams per connection, closed loop), then 10,000 Checks per second on a fixed
#       schedule (latency from when each Check was due); both again against the floor,
#       examples/bare_ext_authz.rs (hyper's HTTP/2 server answering a fixed CheckResponse of the
#       gateway's answer's size, nothing decided);
#   (b) forward-auth (`[forward_auth]`, kind nginx) behind nginx `auth_request`, against the same
#       nginx asking a bare hyper handler (examples/bare_handler.rs) instead: nginx terminates
#       the PSP's mutual TLS (`ssl_verify_client optional_no_ca`, as deploy/nginx/), asks, and
#       proxies to the upstream; oha measures what the client gets.
# The gateway, nginx, the bare handler and the upstream run on core 0, the load generators on
# core 1, A/B twice. Every Check must be allowed and every response 200, or the run fails.
# Writes the table between the `extauthz:begin` and `extauthz:end` markers of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs="${1:-8}"
work="$root/target/load-ext-authz"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"

[ "$(nproc)" -ge 2 ] || { echo "this comparison needs 2 cores" >&2; exit 2; }
if ! need nginx; then apt_install nginx-light; fi
need oha || cargo install --locked oha
cargo build --release --locked --quiet --bin psp-gateway --example bare_handler \
  --example bare_ext_authz
cargo bench --locked --bench ext_authz_load --no-run --quiet 2>/dev/null
loadgen=$(find target/release/deps -maxdepth 1 -type f -executable -name 'ext_authz_load-*' \
  -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2)
[ -x "$loadgen" ] || { echo "benches/ext_authz_load.rs did not build" >&2; exit 1; }

{
  gateway_config 8080 8443 9090
  cat <<EOF

[ext_authz]
listen = "127.0.0.1:9191"
callers = ["127.0.0.1/32"]

[forward_auth]
listen = "127.0.0.1:9292"

[[forward_auth.callers]]
kind = "nginx"
addresses = ["127.0.0.1/32"]
certificate_header = "x-ssl-client-cert"
EOF
} >"$work/gateway.toml"

# edge PORT AUTH_UPSTREAM: nginx terminating the PSP's TLS, asking AUTH_UPSTREAM, then
# proxying to the upstream (deploy/nginx/psp-gateway.conf, on loopback).
edge() {
  cat <<EOF
  server {
$(nginx_tls_listen "$1")
    ssl_verify_client optional_no_ca;
    ssl_verify_depth 4;
    ssl_session_cache shared:SSL$1:10m;
    keepalive_requests 1000000;
    location / {
      auth_request /_psp_check;
      auth_request_set \$psp_auth_number \$upstream_http_x_psp_auth_number;
      auth_request_set \$psp_check_id \$upstream_http_x_psp_check_id;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Psp-Auth-Number \$psp_auth_number;
      proxy_set_header X-Psp-Check-Id \$psp_check_id;
      proxy_set_header X-SSL-Client-Cert "";
    }
    location = /_psp_check {
      internal;
      proxy_pass http://$2;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Method \$request_method;
      proxy_set_header Host \$host;
      proxy_set_header X-SSL-Client-Cert \$ssl_client_escaped_cert;
    }
  }
EOF
}
nginx_conf ""
taskset -c 0 nginx -c "$work/nginx.conf" -p "$work" &
started $!
nginx_conf_as edge "  upstream up { server 127.0.0.1:18080; keepalive 64; }
  upstream gateway_auth { server 127.0.0.1:9292; keepalive 64; }
  upstream bare_auth { server 127.0.0.1:18090; keepalive 64; }
$(edge 18460 gateway_auth)
$(edge 18461 bare_auth)"
taskset -c 0 nginx -c "$work/edge.conf" -p "$work" &
edge_pid=$!
started "$edge_pid"
taskset -c 0 ./target/release/psp-gateway serve --config "$work/gateway.toml" \
  >"$work/logs/gateway.log" 2>&1 &
gateway_pid=$!
started "$gateway_pid"
# An empty body, as forward-auth's permit: nginx's auth_request does not read the answer's
# body, and closes an upstream connection whose answer had one (a first run, with 2 bytes,
# measured a new connection per request).
taskset -c 0 ./target/release/examples/bare_handler 127.0.0.1:18090 0 &
started $!
for port in 18080 18460 18461 18090 8443 9191 9292; do wait_port "$port"; done
# The forward-auth path must be the gateway's decision: its identity reaches the upstream's
# request (nginx copies X-Psp-Auth-Number; the bare handler sends none).
curl -sf --insecure --cert certs/psp/valid.pem --key certs/psp/valid.key \
  https://127.0.0.1:18460/v1/accounts >/dev/null
# (Log lines are written every 10 ms.)
for _ in $(seq 1 20); do
  grep -q '"face":"forward-auth"' "$work/logs/gateway.log" && break
  sleep 0.1
done
grep -q '"face":"forward-auth"' "$work/logs/gateway.log" ||
  { echo "the forward-auth face did not decide" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_hz=$(getconf CLK_TCK)
: >"$work/runs"

# grpc NAME RATE [PORT PID]: one ext_authz_load run against the gateway (or the server on
# PORT, process PID); appends "name per_second p50 p99 cpu_us".
grpc() {
  local before after port="${3:-9191}" pid="${4:-$gateway_pid}"
  before=$(cpu_ticks "$pid")
  EXT_AUTHZ_ADDR="127.0.0.1:$port" SECONDS=$secs RATE=$2 CONNS=2 STREAMS=16 \
    taskset -c 1 "$loadgen" >"$work/$1.json"
  after=$(cpu_ticks "$pid")
  python3 - "$work/$1.json" "$1" "$((after - before))" "$tick_hz" >>"$work/runs" <<'PY'
import json, sys
path, name, ticks, hz = sys.argv[1:]
r = json.load(open(path))
print(name, round(r["per_second"]), r["p50_us"] / 1000, r["p99_us"] / 1000,
      round(int(ticks) / int(hz) * 1e6 / r["checks"], 1))
PY
  tail -1 "$work/runs"
}

# http NAME PID PORT: oha through the edge nginx; CPU time of PID (the gateway, or the bare
# handler) and of the edge nginx per request.
http() {
  local before after ebefore eafter
  before=$(cpu_ticks "$2")
  ebefore=$(cpu_ticks "$edge_pid")
  taskset -c 1 oha --no-tui --output-format json -z "${secs}s" -c 16 "${tls[@]}" \
    "https://127.0.0.1:$3/v1/accounts" >"$work/$1.json"
  after=$(cpu_ticks "$2")
  eafter=$(cpu_ticks "$edge_pid")
  python3 "$root/benches/runs.py" line "$work/$1.json" "$1" 200 "$tick_hz" \
    "$((after - before))" "$((eafter - ebefore))" >>"$work/runs"
  tail -1 "$work/runs"
}

# The floor of this machine at that rate: a bare hyper handler (HTTP/1.1, 16 connections)
# at 10,000 requests per second, latency corrected for the schedule as ext_authz_load's is.
floor() {
  taskset -c 1 oha --no-tui --output-format json -z "${secs}s" -q 10000 --latency-correction \
    -c 16 http://127.0.0.1:18090/ >"$work/$1.json"
  python3 "$root/benches/runs.py" line "$work/$1.json" "$1" 200 1 0 >>"$work/runs"
  tail -1 "$work/runs"
}

# PROFILE=1: a flame graph of the gateway answering 10,000 Checks a second
# (benches/flame-ext-authz-10k.svg) and its system calls and context switches per Check, then
# stop.
if [ "${PROFILE:-}" = 1 ]; then
  need perf || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
  need inferno-flamegraph || cargo install --locked inferno
  perf record -q -F 999 --call-graph dwarf,16384 -p "$gateway_pid" -o "$work/grpc.perf" \
    -- sleep "$secs" 2>/dev/null &
  rec=$!
  sleep 0.3
  grpc grpc-10k-profiled 10000
  wait "$rec" || true
  perf script -i "$work/grpc.perf" 2>/dev/null | inferno-collapse-perf >"$work/grpc.folded"
  rm -f "$work/grpc.perf"
  inferno-flamegraph --title "psp-gateway: ext_authz Check, 10,000/s" <"$work/grpc.folded" \
    >"$root/benches/flame-ext-authz-10k.svg"
  echo "written: benches/flame-ext-authz-10k.svg"
  events="context-switches"
  for c in read write readv writev recvfrom sendto epoll_wait futex sched_yield; do
    events="$events,syscalls:sys_enter_$c"
  done
  perf stat -x, -e "$events" -p "$gateway_pid" -o "$work/grpc.stat" &
  stat=$!
  sleep 0.3
  grpc grpc-10k-counted 10000
  kill -INT "$stat"
  wait "$stat" || true
  checks=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checks"])' \
    "$work/grpc-10k-counted.json")
  awk -F, -v n="$checks" '$3 != "" && $1 ~ /^[0-9]+$/ && $1 > 0 {
      sub("syscalls:sys_enter_", "", $3); printf "per Check: %s %.2f\n", $3, $1 / n }' \
    "$work/grpc.stat"
  exit 0
fi

# The gRPC floor answers as many bytes as the gateway's allowed CheckResponse.
EXT_AUTHZ_ADDR=127.0.0.1:9191 SECONDS=1 RATE=100 taskset -c 1 "$loadgen" >"$work/sizing.json"
answer_bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["answer_bytes"])' \
  "$work/sizing.json")
taskset -c 0 ./target/release/examples/bare_ext_authz 127.0.0.1:19191 "$answer_bytes" &
bare_grpc_pid=$!
started "$bare_grpc_pid"
wait_port 19191

for round in 1 2; do
  floor "floor-10k-$round"
  grpc "grpc-max-$round" 0
  grpc "grpc-10k-$round" 10000
  grpc "grpc-floor-max-$round" 0 19191 "$bare_grpc_pid"
  grpc "grpc-floor-10k-$round" 10000 19191 "$bare_grpc_pid"
  http "forward-gateway-$round" "$gateway_pid" 18460
  http "forward-bare-$round" "$(pgrep -f 'bare_handler 127.0.0.1:18090' | head -1)" 18461
done

PYTHONPATH="$root/benches" python3 - "$work/runs" "$secs" >"$work/table.md" <<'PY'
import sys
import runs as r
mean = r.means(sys.argv[1])
print(f"{r.ran(f'benches/load-ext-authz.sh {sys.argv[2]}')} {sys.argv[2]} s per run, servers on "
      "core 0, load generators on core 1, means of two rounds.\n")
print("| what | requests/s | p50, ms | p99, ms | gateway CPU per request, µs | target |")
print("|---|---|---|---|---|---|")
print(f"| ext_authz `Check`, cached, as fast as answered (2 connections × 16 streams) | {mean('grpc-max', 0):,.0f} | {mean('grpc-max', 1):.2f} | {mean('grpc-max', 2):.2f} | {mean('grpc-max', 3):.1f} | |")
print(f"| ext_authz `Check`, cached, 10,000/s on a schedule | {mean('grpc-10k', 0):,.0f} | {mean('grpc-10k', 1):.2f} | {mean('grpc-10k', 2):.2f} | {mean('grpc-10k', 3):.1f} | p99 < 1 ms |")
print(f"| the gRPC floor: the same generator against a bare hyper HTTP/2 server answering a fixed CheckResponse of the same size, as fast as answered | {mean('grpc-floor-max', 0):,.0f} | {mean('grpc-floor-max', 1):.2f} | {mean('grpc-floor-max', 2):.2f} | bare server: {mean('grpc-floor-max', 3):.1f} | |")
print(f"| the gRPC floor, 10,000/s on a schedule | {mean('grpc-floor-10k', 0):,.0f} | {mean('grpc-floor-10k', 1):.2f} | {mean('grpc-floor-10k', 2):.2f} | bare server: {mean('grpc-floor-10k', 3):.1f} | |")
print(f"| the machine's floor: a bare hyper handler, HTTP/1.1, 10,000/s, oha `--latency-correction` | {mean('floor-10k', 0):,.0f} | {mean('floor-10k', 1):.2f} | {mean('floor-10k', 2):.2f} | | |")
g, b = mean("forward-gateway", 0), mean("forward-bare", 0)
print(f"| nginx `auth_request` → psp-gateway forward-auth, mTLS keep-alive, 16 connections | {g:,.0f} | {mean('forward-gateway', 1):.2f} | {mean('forward-gateway', 2):.2f} | {mean('forward-gateway', 3):.1f} (nginx: {mean('forward-gateway', 4):.1f}) | |")
print(f"| nginx `auth_request` → a bare hyper handler, the same | {b:,.0f} | {mean('forward-bare', 1):.2f} | {mean('forward-bare', 2):.2f} | bare handler: {mean('forward-bare', 3):.1f} (nginx: {mean('forward-bare', 4):.1f}) | |")
print(f"| forward-auth / bare handler | {g / b:.2f}× | | | | |")
PY
cat "$work/table.md"
between_markers extauthz "$work/table.md"
echo "written: BENCHMARKS.md (extauthz:begin..extauthz:end)"
