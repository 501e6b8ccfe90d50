#!/usr/bin/env bash
# The cost of signed evidence (docs/evidence.md), measured in one run.
#
#   benches/load-evidence.sh [seconds] [connections]
#
# A/B/C three times:
#   A. gateway.toml without [evidence] (nothing signed), no audit file;
#   B. gateway.toml as it is: [evidence] with the sandbox's ECDSA P-256 key (every answer of
#      the endpoint signed, each gateway decision signed once);
#   C. B plus [audit] with signed checkpoints every 1,000 records or 60 s, synced every 100 ms
#      (the file on this machine's disk, in a temporary directory).
# Each time oha (crates.io; `cargo install oha`) runs a bounded load against loopback only:
#   1. the check endpoint, one certificate, cached result (a signature per answer, reused
#      within its second for the same bytes);
#   2. the gateway, keep-alive mTLS, one PSP on one route (one signed decision, then a cache
#      lookup per request).
# Servers and oha share the machine's 2 cores: compare within the run. Prints requests per
# second, p50 and p99 of each, and the statuses (every one must be 200).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-8}"
conns="${2:-16}"

command -v oha >/dev/null || { echo "oha is needed: cargo install oha" >&2; exit 2; }
cargo build --release --locked --quiet

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

signed="$work/signed.toml"
sed "s|\"certs/|\"$PWD/certs/|g; s|\"registers/|\"$PWD/registers/|g" gateway.toml |
  sed "s|^enabled = true|enabled = true\ncerts = \"$PWD/certs\"|" |
  sed "s|rate_limit = { requests = 15000, period_seconds = 300 }|rate_limit = { requests = 1000000000, period_seconds = 300 }|" \
    >"$signed"
grep -q 'requests = 1000000000' "$signed" || { echo "gateway.toml's api.rate_limit line changed" >&2; exit 1; }
grep -q '^\[evidence\]' "$signed" || { echo "gateway.toml has no [evidence] section" >&2; exit 1; }
unsigned="$work/unsigned.toml"
sed '/^\[evidence\]/,/^signing_key/d' "$signed" >"$unsigned"
! grep -q 'signing_key' "$unsigned" || { echo "could not remove [evidence]" >&2; exit 1; }
audited="$work/audited.toml"
cp "$signed" "$audited"
cat >>"$audited" <<EOF

[audit]
file = "$work/audit/audit.jsonl"
checkpoints = "$work/audit/checkpoints.jsonl"
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

summary() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
s, p = d["summary"], d["latencyPercentiles"]
codes = d.get("statusCodeDistribution", {})
bad = {k: v for k, v in codes.items() if k != "200"}
if bad:
    sys.exit("unexpected statuses: %s" % codes)
print("%9.0f req/s  p50 %6.3f ms  p99 %6.3f ms" % (s["requestsPerSec"], p["p50"] * 1000, p["p99"] * 1000))'
}
endpoint() {
  # One call first: the password is verified once and remembered (every verification counts
  # against the failed-login quota, which 16 first calls at once would reach).
  curl -sf -o /dev/null -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' -H 'fi_reference_id: LOAD-1' \
    -H "eidas: $eidas" 'http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX'
  oha --no-tui --output-format json -z "${secs}s" -c "$conns" \
    -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' -H 'fi_reference_id: LOAD-1' \
    -H "eidas: $eidas" 'http://127.0.0.1:8080/v1/psp/eidas?jurisdiction=XX' | summary
}
gateway() {
  oha --no-tui --output-format json -z "${secs}s" -c "$conns" \
    --cacert certs/server/ca.pem --cert certs/psp/valid.pem --key certs/psp/valid.key \
    https://127.0.0.1:8443/v1/accounts | summary
}

for round in 1 2 3; do
  for variant in A B C; do
    case $variant in
      A) config=$unsigned; what="nothing signed" ;;
      B) config=$signed; what="[evidence], ES256" ;;
      C) config=$audited; what="[evidence] + audit file with checkpoints" ;;
    esac
    start "$config"
    if [ "$variant" != A ]; then
      curl -sf http://127.0.0.1:9090/.well-known/jwks.json | grep -q '"ES256"' ||
        { echo "no ES256 key in the JWKS" >&2; exit 1; }
    fi
    echo "round $round, $variant ($what)"
    echo "   endpoint (cached):         $(endpoint)"
    echo "   gateway (keep-alive mTLS): $(gateway)"
    stop
    if [ "$variant" = C ]; then
      ./target/release/psp-gateway audit verify "$work/audit/audit.jsonl" \
        --checkpoints "$work/audit/checkpoints.jsonl" \
        --key <(sed -n 's/^signing_key = "\(.*\)"/\1/p' "$signed" | xargs openssl pkey -pubout -in) |
        sed 's/^/   /'
      rm -rf "$work/audit"
    fi
  done
done
