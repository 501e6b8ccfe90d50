#!/usr/bin/env bash
# The margin of the shared counters under a wrong-password flood (issue 39, docs/replicas.md):
# the flood rate at which the first decision by a failure mode appears while Redis is healthy.
#
#   benches/login-flood.sh [seconds] [levels]
#
# Starts a real redis-server (Debian package) on a loopback port with an ACL user, then the
# release sandbox with [shared_state] on it: the default budget (5 ms), both failure modes
# `open` (so every call Redis does not answer in time is visible as a fallback), and
# failed-login quotas no flood here reaches (so every wrong password costs an argon2
# verification). For each level (the number of flooding connections; 0 is the baseline),
# for `seconds`:
#   - oha (crates.io; `cargo install oha`) floods the check endpoint with a wrong password
#     (each attempt an argon2 verification, or 503 `server_busy` past the password slots);
#   - a second oha, the victim, calls the endpoint with the right password (remembered after
#     its first call: no argon2) at 200 requests per second on one connection;
#   - the fallbacks counted in /metrics over the level (both kinds) are the figure: 0 means the
#     flood did not make Redis look slow; beside them, the times a kind switched to its
#     failure mode (psp_gateway_shared_state_degradations_total: 50 ms without an answer).
# Loopback only, bounded in time. Servers and both oha share the machine's 2 cores: compare
# within the run. The flood's own oha runs at nice 19 (FLOOD_NICE, default 19; 0 to run it at
# the normal priority): in production the flood's clients are elsewhere, and on 2 cores a
# generator at the normal priority takes CPU from the gateway and from Redis itself, which is
# not what is measured (whether the gateway's own password work delays its Redis calls).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-8}"
levels="${2:-0 1 2 4 8 16}"

command -v oha >/dev/null || { echo "oha is needed: cargo install oha" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "redis-server is needed: apt-get install redis-server" >&2; exit 2; }
cargo build --release --locked --quiet --bin psp-gateway

work=$(mktemp -d)
redis_pid=""
server=""
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  [ -n "$redis_pid" ] && kill -TERM "$redis_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

. "$(dirname "$0")/redis.sh"
start_bench_redis "$work"

config="$work/flood.toml"
sed "s|\"certs/|\"$PWD/certs/|g; s|\"registers/|\"$PWD/registers/|g" gateway.toml |
  sed "s|^enabled = true|enabled = true\ncerts = \"$PWD/certs\"|" |
  sed "s|rate_limit = { requests = 15000, period_seconds = 300 }|rate_limit = { requests = 1000000000, period_seconds = 300 }\nfailed_logins = { per_source = 1000000000, per_user = 1000000000, per_user_and_source = 1000000000 }|" \
    >"$config"
grep -q 'per_source = 1000000000' "$config" || { echo "gateway.toml's api.rate_limit line changed" >&2; exit 1; }
cat >>"$config" <<EOF

[shared_state]
url = "redis://127.0.0.1:$port"
username = "gateway"
password_file = "$work/password"
budget_ms = 5
rate_limits = "open"
failed_logins = "open"
EOF

./target/release/psp-gateway serve --config "$config" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  curl -sf http://127.0.0.1:9090/readyz >/dev/null 2>&1 && break
  sleep 0.1
done
grep -q '"sharedState":"ok"' <(curl -s http://127.0.0.1:9090/readyz) ||
  { echo "readyz does not report the shared state ok:" >&2; curl -s http://127.0.0.1:9090/readyz >&2; cat "$work/serve.log" >&2; exit 1; }

eidas=$(openssl x509 -in certs/psp/valid.pem -outform DER | base64 -w0)
url='http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX'
# counted SERIES: the sum of a counter's series in /metrics (both kinds, every mode).
counted() {
  curl -s http://127.0.0.1:9090/metrics |
    awk -v series="^$1" '$0 ~ series { n += $2 } END { printf "%d\n", n }'
}
# The victim's password remembered before the first level.
curl -s -o /dev/null -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' -H 'fi_reference_id: V' -H "eidas: $eidas" "$url"

printf '%-6s %14s %14s %12s %12s %10s %13s\n' flood "wrong pw/s" "busy 503/s" "victim p50" "victim p99" fallbacks degradations
for level in $levels; do
  before=$(counted psp_gateway_shared_state_fallbacks_total)
  switched_before=$(counted psp_gateway_shared_state_degradations_total)
  if [ "$level" -gt 0 ]; then
    nice -n "${FLOOD_NICE:-19}" oha --no-tui --output-format json -z "${secs}s" -c "$level" \
      -H 'Authorization: Basic c2FuZGJveDp3cm9uZw==' -H 'fi_reference_id: F' -H "eidas: $eidas" \
      "$url" >"$work/flood.json" &
    flood=$!
  fi
  oha --no-tui --output-format json -z "${secs}s" -c 1 -q 200 \
    -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' -H 'fi_reference_id: V' -H "eidas: $eidas" \
    "$url" >"$work/victim.json"
  if [ "$level" -gt 0 ]; then wait "$flood"; else echo '{}' >"$work/flood.json"; fi
  after=$(counted psp_gateway_shared_state_fallbacks_total)
  switched=$(($(counted psp_gateway_shared_state_degradations_total) - switched_before))
  python3 - "$work/flood.json" "$work/victim.json" "$level" "$((after - before))" "$secs" "$switched" <<'EOF'
import json, sys
flood, victim = (json.load(open(p)) for p in sys.argv[1:3])
level, fell, secs, switched = sys.argv[3], sys.argv[4], float(sys.argv[5]), sys.argv[6]
codes = flood.get("statusCodeDistribution", {})
p = victim["latencyPercentiles"]
vcodes = victim.get("statusCodeDistribution", {})
assert set(vcodes) <= {"200"}, "the victim got %s" % vcodes
print("%-6s %14.1f %14.1f %9.2f ms %9.2f ms %10s %13s" % (
    level, codes.get("401", 0) / secs, codes.get("503", 0) / secs,
    p["p50"] * 1000, p["p99"] * 1000, fell, switched))
EOF
done
