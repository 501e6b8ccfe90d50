#!/usr/bin/env bash
# Memory of psp-gateway with a full-size EBA register loaded and many idle keep-alive
# connections open (issue 16: under 100 MB with 330,000 entities and 10,000 connections).
#
#   benches/idle.sh [connections, default 10000]
#
# Generates the 330,000-entity EBA export (benches/eba_load.rs writes it on its first run),
# starts the release gateway with it as a register beside the sandbox's, opens the
# connections as the `valid` PSP (one request each, answered 200, then idle: Python's
# asyncio and ssl, benches/idle_clients.py), and reads the gateway's VmRSS before and after.
# Writes the table between the `idle:begin` and `idle:end` markers of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
connections="${1:-10000}"
work="$root/target/idle"
# shellcheck source=benches/lib.sh
. "$root/benches/lib.sh"

need nginx || apt_install nginx-light
export_file="$root/target/tmp/eba-bench/eba_330000.json"
[ -f "$export_file" ] || cargo bench --locked --bench eba_load
cargo build --release --locked --quiet --bin psp-gateway
# Each side holds one descriptor per connection, and a few more.
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((connections + 500)) ]; then
  echo "open files are limited to $(ulimit -n): too few for $connections connections" >&2
  exit 1
fi

nginx_conf ""
nginx -c "$work/nginx.conf" -p "$work" &
started $!
{
  gateway_config 8080 8443 9090
  cat <<TOML

[[registers.files]]
path = "$export_file"
format = "eba"

[limits]
max_connections = $((connections + 1000))
max_connections_per_source = $((connections + 1000))
idle_timeout_ms = 600000
TOML
} >"$work/gateway.toml"
./target/release/psp-gateway serve --config "$work/gateway.toml" >"$work/logs/gateway.log" 2>&1 &
gateway_pid=$!
started "$gateway_pid"
wait_port 18080
wait_port 8443 600
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$gateway_pid/status"; }
sleep 1
before=$(rss)

open_idle_clients "$connections" 1200
after=$(rss)
close_idle_clients

table="Run $(date -u '+%Y-%m-%d %H:%M UTC'), \`benches/idle.sh $connections\`: the gateway's VmRSS.

| state | RSS |
|---|---|
| sandbox data and the 330,000-entity EBA register loaded, no connection | $((before / 1024)) MB |
| and $connections idle keep-alive TLS connections (one request each) | $((after / 1024)) MB |
| per idle connection | $(((after - before) / connections)) KB |"
echo "$table"
echo "$table" >"$work/table.md"
between_markers idle "$work/table.md"
