#!/usr/bin/env bash
# What one idle keep-alive mTLS connection holds on the heap (issue 28 section 2).
#
#   benches/idle-heap.sh [connections, default 1000]
#
# Runs the release gateway (the sandbox configuration) under heaptrack (Debian `heaptrack`),
# opens the connections as the `valid` PSP (one request each, answered 200, then idle:
# benches/idle_clients.py), kills the gateway, and sorts the heap it had in use by who
# allocated it (benches/idle_heap.py): hyper's read and write buffers, rustls, the
# connection's task, and the rest. Writes the table between the `idle-heap:begin` and
# `idle-heap:end` markers of BENCHMARKS.md. The heap sorted is what is allocated when the
# gateway is killed (SIGKILL, so that no shutdown frees anything) with every connection open
# and idle: heaptrack counts it as "leaked". The peak would not do: it comes while the
# connections are being opened, with handshakes in flight.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
connections="${1:-1000}"
work="$root/target/idle-heap"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"

need nginx || apt_install nginx-light
need heaptrack || apt_install heaptrack
cargo build --release --locked --quiet --bin psp-gateway
ulimit -n "$(ulimit -Hn)"

nginx_conf ""
nginx -c "$work/nginx.conf" -p "$work" &
started $!
{
  gateway_config 8080 8443 9090
  cat <<TOML

[limits]
max_connections = $((connections + 1000))
max_connections_per_source = $((connections + 1000))
idle_timeout_ms = 600000
TOML
} >"$work/gateway.toml"
heaptrack -o "$work/heap" ./target/release/psp-gateway serve --config "$work/gateway.toml" \
  >"$work/logs/gateway.log" 2>&1 &
tracked=$!
wait_port 18080
wait_port 8443 600
sleep 1

open_idle_clients "$connections" 600
# heaptrack's child is the gateway: kill it (the clients still connected), then the clients.
pkill -KILL -P "$tracked"
wait "$tracked" || true
close_idle_clients

heaptrack_print -f "$work/heap.zst" --print-peaks 0 --print-allocators 0 --print-temporary 0 \
  --print-leaks 0 --flamegraph-cost-type leaked -F "$work/idle.folded" >/dev/null
table="Run $(date -u '+%Y-%m-%d %H:%M UTC'), \`benches/idle-heap.sh $connections\`: the heap in use with every connection open and idle, by who allocated it (heaptrack $(heaptrack --version 2>/dev/null | awk '{print $2}'), release build).

$(python3 "$root/benches/idle_heap.py" "$work/idle.folded" "$connections")"
echo "$table"
echo "$table" >"$work/table.md"
between_markers idle-heap "$work/table.md"
