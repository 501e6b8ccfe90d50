#!/usr/bin/env bash
# Load measurement of the check endpoint against a baseline measured in the same run.
#
#   benches/load-api.sh [seconds] [connections]
#
# Starts the release sandbox (gateway.toml: API :8080, admin :9090), then runs wrk, bounded in
# time, against loopback only:
#   1. baseline: GET /healthz on the admin listener (same server plumbing, no work);
#   2. the check endpoint, one certificate, cached result (the steady state of a caller that
#      asks about the same PSP again and again: argon2 verification cached, report cached).
# It prints requests per second of each and their ratio. Numbers on a shared 2-core machine are
# noisy: compare the ratio, not the absolute figures, across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
conns="${2:-16}"

command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 2; }
cargo build --release --locked --quiet
./target/release/psp-gateway serve --config gateway.toml >/tmp/psp-gateway-load.log 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do
  curl -sf http://127.0.0.1:9090/readyz >/dev/null 2>&1 && break
  sleep 0.2
done

eidas=$(openssl x509 -in certs/psp/valid.pem -outform DER | base64 -w0)
check() {
  curl -s -o /dev/null -w '%{http_code}' -u sandbox:sandbox -H 'fi_reference_id: LOAD-1' \
    -H "eidas: $eidas" 'http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX'
}
[ "$(check)" = 200 ] || { echo "the check endpoint does not answer 200" >&2; exit 1; }

rps() { awk '/Requests\/sec/ {print $2}'; }
base=$(wrk -t2 -c"$conns" -d"${secs}s" http://127.0.0.1:9090/healthz | rps)
api=$(wrk -t2 -c"$conns" -d"${secs}s" \
  -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' -H 'fi_reference_id: LOAD-1' \
  -H "eidas: $eidas" 'http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX' | rps)
echo "baseline GET /healthz:               $base req/s"
echo "GET /v1/psp/eidas (cached result):   $api req/s"
awk -v a="$api" -v b="$base" 'BEGIN { printf "ratio check/baseline:                %.2f\n", a / b }'
