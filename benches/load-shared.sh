#!/usr/bin/env bash
# The cost of counters shared through Redis, measured in one run (docs/replicas.md):
#
#   benches/load-shared.sh [seconds] [connections]
#
# Starts a real redis-server (Debian package) on a loopback port in a temporary directory with
# an ACL user, then the release sandbox twice, one after the other, on the same ports:
#   A. gateway.toml as it is (per-process counters);
#   B. gateway.toml with [shared_state] pointing at that Redis.
# Each time, oha (crates.io; `cargo install oha`) runs a bounded load against loopback only:
#   1. the check endpoint, one certificate, cached result (its per-source rate limit is the
#      shared counter: one Redis round trip per request in B);
#   2. the gateway, keep-alive mTLS, cached decision (no shared counter on this path: the
#      gateway's per-client rate limit is not shared; its figures show the run's noise).
# Then, in B, Redis is paused (SIGSTOP: it accepts connections and never answers) and the
# endpoint is measured again: every request is decided by the failure mode within the budget
# (`budget_ms`, 5 ms), the worst added latency shows in the slowest request. Prints
# requests per second, p50, p99 and the slowest request of each. Numbers on a shared 2-core
# machine are noisy: compare within the run.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
conns="${2:-16}"

command -v oha >/dev/null || { echo "oha is needed: cargo install oha" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "redis-server is needed: apt-get install redis-server" >&2; exit 2; }
cargo build --release --locked --quiet

work=$(mktemp -d)
redis_pid=""
server=""
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  [ -n "$redis_pid" ] && kill -CONT "$redis_pid" 2>/dev/null; [ -n "$redis_pid" ] && kill -TERM "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Redis: loopback, no persistence, the default user off, one ACL user with what the limiter needs.
. "$(dirname "$0")/redis.sh"
start_bench_redis "$work"

# Both configurations: gateway.toml with absolute paths, and an endpoint quota no load here
# reaches (15,000 per 5 minutes would turn most of the run into 429s; every request still goes
# through the counter, which is what is measured).
local_config="$work/local.toml"
sed "s|\"certs/|\"$PWD/certs/|g; s|\"registers/|\"$PWD/registers/|g" gateway.toml |
  sed "s|^enabled = true|enabled = true\ncerts = \"$PWD/certs\"|" |
  sed "s|rate_limit = { requests = 15000, period_seconds = 300 }|rate_limit = { requests = 1000000000, period_seconds = 300 }|" \
    >"$local_config"
grep -q 'requests = 1000000000' "$local_config" || { echo "gateway.toml's api.rate_limit line changed" >&2; exit 1; }
shared="$work/shared.toml"
cp "$local_config" "$shared"
cat >>"$shared" <<EOF

[shared_state]
url = "redis://127.0.0.1:$port"
username = "gateway"
password_file = "$work/password"
EOF

eidas=$(openssl x509 -in certs/psp/valid.pem -outform DER | base64 -w0)
start() {
  ./target/release/psp-gateway serve --config "$1" >"$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 1 100); do
    curl -sf http://127.0.0.1:9090/readyz >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "the sandbox did not become ready:" >&2; cat "$work/serve.log" >&2; exit 1
}
stop() { kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=""; }

# oha's summary: requests/sec, p50, p99 and the slowest, in milliseconds.
summary() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
s, p = d["summary"], d["latencyPercentiles"]
codes = d.get("statusCodeDistribution", {})
print("%9.0f req/s  p50 %6.2f ms  p99 %6.2f ms  slowest %7.2f ms  statuses %s" % (
    s["requestsPerSec"], p["p50"] * 1000, p["p99"] * 1000, s["slowest"] * 1000, codes))'
}
endpoint() {
  oha --no-tui --output-format json -z "${secs}s" -c "$conns" \
    -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' -H 'fi_reference_id: LOAD-1' \
    -H "eidas: $eidas" 'http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX' | summary
}
gateway() {
  oha --no-tui --output-format json -z "${secs}s" -c "$conns" \
    --cacert certs/server/ca.pem --cert certs/psp/valid.pem --key certs/psp/valid.key \
    https://127.0.0.1:8443/v1/accounts | summary
}

start "$local_config"
echo "A. per-process counters"
echo "   endpoint (cached):        $(endpoint)"
echo "   gateway (keep-alive mTLS): $(gateway)"
stop

start "$shared"
grep -q '"sharedState":"ok"' <(curl -s http://127.0.0.1:9090/readyz) ||
  { echo "readyz does not report the shared state ok:" >&2; curl -s http://127.0.0.1:9090/readyz >&2; exit 1; }
echo "B. counters in Redis (redis-server $(redis-server --version | awk '{print $3}'), budget 5 ms)"
echo "   endpoint (cached):        $(endpoint)"
echo "   gateway (keep-alive mTLS): $(gateway)"
kill -STOP "$redis_pid"
echo "   endpoint, Redis paused:   $(endpoint)"
kill -CONT "$redis_pid"
stop
