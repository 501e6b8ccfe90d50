#!/usr/bin/env bash
# Issue 16's load comparison, A/B/A/B in one run, on loopback only, bounded in time:
#
#   benches/load.sh [seconds per run, default 8]
#
#   (a) keep-alive mTLS proxying: psp-gateway against nginx (ssl_verify_client on,
#       proxy_pass to a keepalive upstream), the same upstream for both; then p99 latency of
#       both at 50 % of nginx's maximum rate;
#   (b) a new connection per request, with session resumption (both sides' defaults) and
#       without (psp-gateway's gateway.tls.session_resumption = false, nginx without session
#       cache or tickets);
#   (c) GET /v1/psp/eidas, same certificate again (a cached answer), rate limit raised,
#       against a bare hyper handler (examples/bare_handler.rs) answering a body of the same
#       size on the same runtime settings;
#   (d) the CPU time per request of each server process (utime + stime from /proc).
#
# PROFILE=1 benches/load.sh 10 draws flame graphs instead (benches/flame-*.svg);
# SYSCALLS=1 benches/load.sh 4 counts each server's system calls per request instead.
#
# Servers run on core 0, oha on core 1 (taskset), HTTP/1.1, 16 connections, TLS 1.3, the
# sandbox's P-256 server key and the `valid` PSP's RSA-2048 client certificate. It installs
# what it needs (nginx-light and gnuplot-nox from Debian, oha from crates.io), fails if any
# response was not the expected status, writes the table with date and machine between the
# `load:begin` and `load:end` markers of BENCHMARKS.md, and draws benches/load.png.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs="${1:-8}"
conns=16
work="$root/target/load"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"

if ! need nginx || ! need gnuplot || ! need cmake; then apt_install nginx-light gnuplot-nox cmake; fi
need oha || cargo install --locked oha
cargo build --release --locked --quiet --bin psp-gateway --example bare_handler

if [ "$(nproc)" -ge 2 ]; then
  server_cpu=(taskset -c 0)
  load_cpu=(taskset -c 1)
else
  server_cpu=()
  load_cpu=()
fi

cat certs/ca/qtsp-issuing.pem certs/ca/qtsp-root.pem >"$work/client-ca.pem"
# nginx: the upstream (lib.sh) in a process of its own, and in another the proxy under
# comparison, with session resumption (18443), without (18445), and with resumption and a
# JSON access line per request written through a 64 KiB buffer (18447: the twin of the
# gateway's audit record, which its log thread writes in batches). Until 2026-11-26 the
# upstream ran inside the proxying nginx's own process: nginx then reached its upstream
# without a switch between processes, which the gateway cannot, and its CPU time counted
# the upstream's work too.
# tls_proxy PORT SESSION_DIRECTIVES: nginx verifying the client certificate and proxying to
# the upstream with keep-alive.
tls_proxy() {
  cat <<EOF
  server {
$(nginx_tls_listen "$1")
    ssl_client_certificate $work/client-ca.pem;
    ssl_verify_client on;
    ssl_verify_depth 3;
    $2
    keepalive_requests 1000000;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-SSL-Client-Cert \$ssl_client_escaped_cert;
    }
  }
EOF
}
# The access line: what the gateway's audit record says of a call, as far as nginx knows it.
access_format="log_format audit escape=json '{\"time\":\"\$time_iso8601\",\"request_id\":\"\$request_id\",'
  '\"peer\":\"\$remote_addr:\$remote_port\",\"resumed\":\"\$ssl_session_reused\",'
  '\"fingerprint\":\"\$ssl_client_fingerprint\",\"subject\":\"\$ssl_client_s_dn\",'
  '\"verify\":\"\$ssl_client_verify\",\"method\":\"\$request_method\",\"path\":\"\$uri\",'
  '\"status\":\$status,\"upstream_status\":\"\$upstream_status\",\"duration\":\$request_time}';"
proxies="  upstream up { server 127.0.0.1:18080; keepalive 64; }
  $access_format
$(tls_proxy 18443 'ssl_session_cache shared:SSL:10m; ssl_session_tickets on;')
$(tls_proxy 18445 'ssl_session_cache off; ssl_session_tickets off;')
$(tls_proxy 18447 "ssl_session_cache shared:SSL:10m; ssl_session_tickets on; access_log $work/logs/access.jsonl audit buffer=64k;")"
nginx_conf ""
"${server_cpu[@]}" nginx -c "$work/nginx.conf" -p "$work" &
started $!
nginx_conf_as proxy "$proxies"
"${server_cpu[@]}" nginx -c "$work/proxy.conf" -p "$work" &
nginx_pid=$!
started "$nginx_pid"

# psp-gateway: the sandbox configuration (lib.sh), and the same again without session
# resumption on other ports.
gateway_config 8080 8443 9090 >"$work/gateway.toml"
gateway_config 8081 8444 9091 |
  sed -e 's|^\(tls = { cert = "[^"]*", key = "[^"]*"\) }|\1, session_resumption = false }|' \
    >"$work/gateway-noresume.toml"
grep -q "session_resumption = false" "$work/gateway-noresume.toml"
"${server_cpu[@]}" ./target/release/psp-gateway serve --config "$work/gateway.toml" \
  >"$work/logs/gateway.log" 2>&1 &
gateway_pid=$!
started "$gateway_pid"
"${server_cpu[@]}" ./target/release/psp-gateway serve --config "$work/gateway-noresume.toml" \
  >"$work/logs/gateway-noresume.log" 2>&1 &
gateway2_pid=$!
started "$gateway2_pid"
for port in 18080 18443 18445 18447 8080 8443 8081 8444; do wait_port "$port"; done

# The endpoint's cached answer, and a bare handler answering as many bytes.
endpoint="http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX"
answer=$(curl -sf -u sandbox:sandbox -H 'fi_reference_id: LOAD-1' -H "eidas: $eidas" "$endpoint")
size=${#answer}
"${server_cpu[@]}" ./target/release/examples/bare_handler 127.0.0.1:18090 "$size" &
bare_pid=$!
started "$bare_pid"
wait_port 18090

# --- measuring --------------------------------------------------------------------------
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_hz=$(getconf CLK_TCK)

# run NAME PID EXPECTED_STATUS OHA_ARGS...: one bounded oha run; appends
# "name rps p50_ms p99_ms cpu_us_per_request" to $work/runs and fails on any other status.
run() {
  local name=$1 pid=$2 status=$3
  shift 3
  local before after
  before=$(cpu_ticks "$pid")
  "${load_cpu[@]}" oha --no-tui --output-format json -z "${secs}s" -c "$conns" "$@" \
    >"$work/$name.json"
  after=$(cpu_ticks "$pid")
  python3 "$root/benches/runs.py" line "$work/$name.json" "$name" "$status" "$tick_hz" \
    "$((after - before))" >>"$work/runs"
  tail -1 "$work/runs"
}

gw=https://127.0.0.1:8443/v1/accounts
ng=https://127.0.0.1:18443/v1/accounts
nl=https://127.0.0.1:18447/v1/accounts

# PROFILE=1: flame graphs of psp-gateway on the keep-alive gateway path and on the cached
# endpoint (perf sampling at 999 Hz with DWARF call stacks, folded by inferno), then stop.
if [ "${PROFILE:-}" = 1 ]; then
  need perf || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
  need inferno-flamegraph || cargo install --locked inferno
  profile() {
    local name=$1
    shift
    perf record -q -F 999 --call-graph dwarf,16384 -p "$gateway_pid" -o "$work/$name.perf" \
      -- sleep "$secs" 2>/dev/null &
    local rec=$!
    sleep 0.3
    "${load_cpu[@]}" oha --no-tui --output-format quiet -z "$((secs - 1))s" -c "$conns" "$@"
    wait "$rec" || true
    perf script -i "$work/$name.perf" 2>/dev/null | inferno-collapse-perf >"$work/$name.folded"
    inferno-flamegraph --title "psp-gateway: $name" <"$work/$name.folded" \
      >"$root/benches/flame-$name.svg"
    echo "written: benches/flame-$name.svg"
  }
  profile gateway-keepalive "${tls[@]}" "$gw"
  profile endpoint-cached "${api_headers[@]}" "$endpoint"
  exit 0
fi

# SYSCALLS=1: the system calls and context switches per request of each server process on
# each path (perf stat on syscall tracepoints, every thread of the process), then stop.
if [ "${SYSCALLS:-}" = 1 ]; then
  need perf || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
  calls="read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait"
  calls="$calls epoll_ctl futex sched_yield accept4 close"
  events="context-switches"
  for c in $calls; do events="$events,syscalls:sys_enter_$c"; done
  requests=$((secs * 2000))
  # count NAME PID OHA_ARGS...: a fixed number of requests; one line per event, per request,
  # and the process's user and system CPU time per request (/proc, in µs).
  count() {
    local name=$1 pid=$2
    shift 2
    perf stat -x, -e "$events" -p "$pid" -o "$work/$name.stat" &
    local stat=$!
    sleep 0.3
    local before after
    before=$(awk '{print $14, $15}' "/proc/$pid/stat")
    "${load_cpu[@]}" oha --no-tui --output-format quiet -n "$requests" -c "$conns" "$@"
    after=$(awk '{print $14, $15}' "/proc/$pid/stat")
    kill -INT "$stat"
    wait "$stat" || true
    echo "$before $after" | awk -v n="$requests" -v hz="$tick_hz" -v name="$name" '{
      printf "%s user-cpu-us %.1f\n%s system-cpu-us %.1f\n", name, ($3 - $1) / hz * 1e6 / n,
        name, ($4 - $2) / hz * 1e6 / n }'
    awk -F, -v n="$requests" -v name="$name" '$3 != "" && $1 ~ /^[0-9]+$/ && $1 > 0 {
        sub("syscalls:sys_enter_", "", $3); printf "%s %s %.2f\n", name, $3, $1 / n }' \
      "$work/$name.stat"
  }
  count gateway-keepalive "$gateway_pid" "${tls[@]}" "$gw"
  count nginx-keepalive "$nginx_pid" "${tls[@]}" "$ng"
  count endpoint-cached "$gateway_pid" "${api_headers[@]}" "$endpoint"
  count bare-handler "$bare_pid" http://127.0.0.1:18090/
  exit 0
fi

: >"$work/runs"
for round in 1 2; do
  run "keepalive-gateway-$round" "$gateway_pid" 200 "${tls[@]}" "$gw"
  run "keepalive-nginx-$round" "$nginx_pid" 200 "${tls[@]}" "$ng"
  run "keepalive-nginxlog-$round" "$nginx_pid" 200 "${tls[@]}" "$nl"
done
# The access lines nginx wrote must be there, one per request (a buffer of 64 KiB may hold
# the last few until nginx exits).
lines=$(wc -l <"$work/logs/access.jsonl")
[ "$lines" -gt 1000 ] || { echo "nginx wrote $lines access lines" >&2; exit 1; }
nginx_max=$(awk '/^keepalive-nginx-/ {s += $2; n++} END {printf "%d", s / n}' "$work/runs")
half=$((nginx_max / 2))
run "halfrate-gateway" "$gateway_pid" 200 -q "$half" "${tls[@]}" "$gw"
run "halfrate-nginx" "$nginx_pid" 200 -q "$half" "${tls[@]}" "$ng"
for round in 1 2; do
  run "resumed-gateway-$round" "$gateway_pid" 200 --disable-keepalive "${tls[@]}" "$gw"
  run "resumed-nginx-$round" "$nginx_pid" 200 --disable-keepalive "${tls[@]}" "$ng"
  run "full-gateway-$round" "$gateway2_pid" 200 --disable-keepalive "${tls[@]}" \
    https://127.0.0.1:8444/v1/accounts
  run "full-nginx-$round" "$nginx_pid" 200 --disable-keepalive "${tls[@]}" \
    https://127.0.0.1:18445/v1/accounts
done
for round in 1 2; do
  run "endpoint-cached-$round" "$gateway_pid" 200 "${api_headers[@]}" "$endpoint"
  run "bare-handler-$round" "$bare_pid" 200 http://127.0.0.1:18090/
done

# --- report -----------------------------------------------------------------------------
PYTHONPATH="$root/benches" python3 - "$work/runs" "$secs" "$nginx_max" >"$work/table.md" <<'PY'
import subprocess, sys, time
import runs as r
mean = r.means(sys.argv[1])
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
print(f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {cores} cores ({model}), "
      f"`benches/load.sh {sys.argv[2]}`: {sys.argv[2]} s per run, 16 connections, servers on "
      "core 0 and oha on core 1, means of two interleaved rounds.\n")
print("| what | psp-gateway | baseline | ratio | target |")
print("|---|---|---|---|---|")
rows = [
    ("keep-alive mTLS proxying, requests/s", "keepalive-gateway", "keepalive-nginx", 0, "nginx", "≥ 1.2×", "keep-alive proxying"),
    ("same, against nginx with a JSON access line, requests/s", "keepalive-gateway", "keepalive-nginxlog", 0, "nginx + access line", "≥ 1.3×", "keep-alive vs nginx logging"),
    ("p50 latency at full load, ms", "keepalive-gateway", "keepalive-nginx", 1, "nginx", "", None),
    (f"p99 latency at 50 % of nginx's maximum ({int(sys.argv[3]) // 2} requests/s), ms", "halfrate-gateway", "halfrate-nginx", 2, "nginx", "≤ 1×", None),
    ("requests/s achieved at that rate", "halfrate-gateway", "halfrate-nginx", 0, "nginx", "", None),
    ("a new connection per request, resumed, requests/s", "resumed-gateway", "resumed-nginx", 0, "nginx", "≥ 2×", "new connections, resumed"),
    ("a new connection per request, full handshakes, requests/s", "full-gateway", "full-nginx", 0, "nginx", "≥ 1.5×", "new connections, full handshakes"),
    ("`/v1/psp/eidas` cached, requests/s", "endpoint-cached", "bare-handler", 0, "bare hyper handler", "≥ 0.7×", "cached endpoint vs bare handler"),
    ("CPU per keep-alive proxied request, µs", "keepalive-gateway", "keepalive-nginx", 3, "nginx", "", None),
    ("CPU per cached endpoint request, µs", "endpoint-cached", "bare-handler", 3, "bare hyper handler", "", None),
]
chart = []
for what, a, b, i, base, target, short in rows:
    x, y = mean(a, i), mean(b, i)
    ratio = x / y if y else float("nan")
    print(f"| {what} | {x:,.1f} | {base}: {y:,.1f} | {ratio:.2f}× | {target} |")
    if short:
        chart.append((short, ratio))
with open(sys.argv[1] + ".chart", "w") as f:
    for label, ratio in chart:
        f.write(f'"{label}" {ratio:.3f}\n')
PY
cat "$work/table.md"

gnuplot <<EOF
set terminal pngcairo size 900,420 font ",10"
set output "$root/benches/load.png"
set title "psp-gateway / baseline, requests per second (1 = parity)"
set style data histogram
set style fill solid 0.8
set boxwidth 0.6
set yrange [0:*]
set xtics rotate by -15
set grid ytics
unset key
plot "$work/runs.chart" using 2:xtic(1) lc rgb "#2b6cb0", 1 with lines lc rgb "#c53030" lw 2
EOF

# Into BENCHMARKS.md, between the markers, with the chart.
printf '\n![ratios](benches/load.png)\n' >>"$work/table.md"
between_markers load "$work/table.md"
echo "written: BENCHMARKS.md (load:begin..load:end), benches/load.png"
