#!/usr/bin/env bash
# A soak: psp-gateway under a mixed load for a while, recording whether it grows.
#
#   scripts/soak.sh [minutes, default 10] [output directory, default target/soak]
#
# Not in CI (it is bounded by its duration, but long). Everything on loopback:
# - the release sandbox (gateway.toml: two sites, the check endpoint, the admin listener,
#   [evidence]) with an audit file and signed checkpoints, forwarding to an nginx upstream;
# - four loads at once, each a bounded oha run per tick (9 s of load, then sampling), ticks
#   repeated until the duration has passed:
#     A. keep-alive mTLS gateway calls by the `valid` PSP            (expected 200)
#     B. a new TLS connection per call by the `unauthorised` PSP     (expected 403)
#     C. check endpoint calls with the right password                (expected 200)
#     D. check endpoint calls with a wrong password, from 127.0.0.2   (expected 401, then 429)
# - and, while they run: a reload every minute (SIGHUP: configuration and reference data), a
#   register file touched every 2 minutes (the file watcher reloads), the upstream restarted
#   every 3 minutes (A may get 502 in that tick only).
# Every tick it records the server's RSS, open descriptors and threads, the argon2 memory the
# password checks hold (psp_gateway_password_check_memory_bytes), and each load's requests
# and unexpected statuses, in soak.csv; at the end it verifies the audit log against
# its checkpoints and draws soak.png (gnuplot). Exit 1 on any unexpected status, connection
# error or audit failure.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
out="${2:-target/soak}"
root=$PWD
mkdir -p "$out"
out=$(cd "$out" && pwd)

need() { command -v "$1" >/dev/null 2>&1; }
if ! need nginx || ! need gnuplot; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light gnuplot-nox >/dev/null
fi
need oha || cargo install --locked oha
cargo build --release --locked --quiet

work=$(mktemp -d)
server=""
upstream=""
cleanup() {
  [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  [ -n "$upstream" ] && kill -TERM "$upstream" 2>/dev/null || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The admin listener stays on 9090: the sandbox PKI's CRL and OCSP URLs name it.
api=18180 gw=18543 admin=9090 up=18181

# The upstream: nginx answering a small JSON body.
mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
error_log $work/nginx/error.log warn;
pid $work/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  server {
    listen 127.0.0.1:$up;
    location / { default_type application/json; return 200 '{"ok":true}'; }
  }
}
CONF
start_upstream() {
  nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
  upstream=$!
}
stop_upstream() { kill -TERM "$upstream" 2>/dev/null; wait "$upstream" 2>/dev/null || true; upstream=""; }
start_upstream

# The sandbox, on its own ports, its register files copied (so that touching one reloads
# this server only), the endpoint's request quota out of reach (the failed-login quota is
# not: load D meets it), and an audit file with checkpoints.
cp -r registers "$work/registers"
sed -e "s|\"certs/|\"$root/certs/|g" -e "s|\"registers/|\"$work/registers/|g" \
  -e "s|^enabled = true|enabled = true\ncerts = \"$root/certs\"|" \
  -e "s|upstream = \"sandbox-echo\"|upstream = \"http://127.0.0.1:$up\"|" \
  -e "s|requests = 15000, period_seconds = 300|requests = 1000000000, period_seconds = 300|" \
  -e "s|127.0.0.1:8080|127.0.0.1:$api|" -e "s|127.0.0.1:8443|127.0.0.1:$gw|" \
  -e "s|127.0.0.1:9090|127.0.0.1:$admin|" gateway.toml >"$work/gateway.toml"
cat >>"$work/gateway.toml" <<EOF

[audit]
file = "$work/audit/audit.jsonl"
checkpoints = "$work/audit/checkpoints.jsonl"
EOF
grep -q "127.0.0.1:$up" "$work/gateway.toml" || { echo "gateway.toml's upstream line changed" >&2; exit 1; }
grep -q "requests = 1000000000" "$work/gateway.toml" || { echo "gateway.toml's rate limit line changed" >&2; exit 1; }

./target/release/psp-gateway serve --config "$work/gateway.toml" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null || { cat "$work/serve.log" >&2; exit 1; }

eidas=$(openssl x509 -in certs/psp/valid.pem -outform DER | base64 -w0)
endpoint="http://127.0.0.1:$api/v1/psp/eidas?jurisdiction=XX"
tls_valid=(--cacert certs/server/ca.pem --cert certs/psp/valid.pem --key certs/psp/valid.key)
tls_refused=(--cacert certs/server/ca.pem --cert certs/psp/unauthorised.pem --key certs/psp/unauthorised.key)
gateway_url="https://localhost:$gw/v1/accounts"

# load NAME OHA_ARGS...: one 9-second run, its JSON in $work/NAME.json.
load() {
  local name=$1
  shift
  oha --no-tui --output-format json -z 9s "$@" >"$work/$name.json" 2>"$work/$name.err" || true
}

# wrong_passwords: load D, about 2 calls a second for 9 s from 127.0.0.2 (its own source
# address: the failed-login quota it meets is its own, not load C's), each status a line of
# $work/D.codes.
wrong_passwords() {
  : >"$work/D.codes"
  local until=$((SECONDS + 9))
  while ((SECONDS < until)); do
    curl -s -o /dev/null -w '%{http_code}\n' --interface 127.0.0.2 --max-time 5 \
      -u sandbox:wrong -H 'fi_reference_id: SOAK-1' -H "eidas: $eidas" "$endpoint" \
      >>"$work/D.codes" || echo "curl-error" >>"$work/D.codes"
    sleep 0.5
  done
}

# tally TICK_HAD_RESTART: "requests unexpected" over the four loads of a tick.
tally() {
  python3 - "$work" "$1" <<'PY'
import json, sys
work, restart = sys.argv[1], sys.argv[2] == "1"
expected = {
    "A": {"200"} | ({"502", "503", "504"} if restart else set()),
    "B": {"403"},
    "C": {"200"},
}
total = unexpected = 0
notes = []
codes = [l.strip() for l in open(f"{work}/D.codes") if l.strip()]
bad = [c for c in codes if c not in ("401", "429")]
total += len(codes)
unexpected += len(bad)
if bad:
    notes.append(f"D: {bad}")
for name, ok in expected.items():
    try:
        r = json.load(open(f"{work}/{name}.json"))
    except Exception as e:
        unexpected += 1
        notes.append(f"{name}: no result ({e})")
        continue
    codes = r.get("statusCodeDistribution", {})
    errors = {k: v for k, v in r.get("errorDistribution", {}).items()
              if k != "aborted due to deadline"}
    total += sum(codes.values())
    bad = {k: v for k, v in codes.items() if k not in ok}
    unexpected += sum(bad.values()) + sum(errors.values())
    if bad or errors:
        notes.append(f"{name}: {bad} {errors}")
print(total, unexpected, "; ".join(notes).replace(",", " "))
PY
}

echo "elapsed_s,rss_kb,fds,threads,password_memory_kb,requests,unexpected,action,notes" >"$out/soak.csv"
start=$(date +%s)
tick=0
while (($(date +%s) - start < minutes * 60)); do
  tick=$((tick + 1))
  action=""
  restart=0
  loads=()
  load A -c 4 -q 150 "${tls_valid[@]}" "$gateway_url" &
  loads+=($!)
  load B -c 2 -q 30 --disable-keepalive "${tls_refused[@]}" "$gateway_url" &
  loads+=($!)
  load C -c 2 -q 100 -H 'Authorization: Basic c2FuZGJveDpzYW5kYm94' \
    -H 'fi_reference_id: SOAK-1' -H "eidas: $eidas" "$endpoint" &
  loads+=($!)
  wrong_passwords &
  loads+=($!)
  sleep 3
  if ((tick % 18 == 0)); then
    stop_upstream
    sleep 1
    start_upstream
    action="upstream restarted"
    restart=1
  elif ((tick % 12 == 0)); then
    touch "$work/registers/sandbox/XX.json"
    action="register file touched"
  elif ((tick % 6 == 0)); then
    kill -HUP "$server"
    action="SIGHUP reload"
  fi
  # The loads only: the server and the upstream are children too.
  wait "${loads[@]}"
  kill -0 "$server" 2>/dev/null || { echo "psp-gateway exited:" >&2; tail -20 "$work/serve.log" >&2; exit 1; }
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$server/status")
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$server/status")
  fds=$(find "/proc/$server/fd" -mindepth 1 -maxdepth 1 | wc -l)
  argon=$(curl -s "http://127.0.0.1:$admin/metrics" |
    awk '/^psp_gateway_password_check_memory_bytes / {printf "%d", $2 / 1024}')
  read -r requests unexpected notes < <(tally "$restart")
  echo "$(($(date +%s) - start)),$rss,$fds,$threads,${argon:-},$requests,$unexpected,$action,$notes" >>"$out/soak.csv"
  printf '%5ss rss %6s kB fds %4s threads %3s argon2 %6s kB requests %6s unexpected %s %s %s\n' \
    "$(($(date +%s) - start))" "$rss" "$fds" "$threads" "${argon:-}" "$requests" "$unexpected" "$action" "$notes"
done

kill -TERM "$server"
wait "$server" 2>/dev/null || true
server=""
openssl pkey -in certs/evidence/sandbox-signing.key -pubout -out "$work/evidence.pub.pem"
./target/release/psp-gateway audit verify "$work/audit/audit.jsonl" \
  --checkpoints "$work/audit/checkpoints.jsonl" --key "$work/evidence.pub.pem" | tee "$out/audit.txt"

gnuplot <<PLOT
set terminal pngcairo size 1000,600 noenhanced
set output "$out/soak.png"
set datafile separator ","
set title "psp-gateway soak: $minutes min, mixed load, reloads and upstream restarts"
set xlabel "minutes"
set ylabel "RSS (MB)"
set y2label "open descriptors / threads"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key bottom right
plot "$out/soak.csv" every ::1 using (\$1/60):(\$2/1024) with lines lw 2 title "RSS (MB)", \
     "" every ::1 using (\$1/60):(\$5/1024) with lines lw 2 title "argon2 buffers held (MB)", \
     "" every ::1 using (\$1/60):3 axes x1y2 with lines lw 2 title "open descriptors", \
     "" every ::1 using (\$1/60):4 axes x1y2 with lines title "threads"
PLOT

python3 - "$out/soak.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n = len(rows)
warm = rows[min(n - 1, max(1, n // 10))]
def at(r): return f"RSS {int(r['rss_kb']) / 1024:.1f} MB (argon2 buffers {int(r['password_memory_kb'] or 0) / 1024:.1f} MB), {r['fds']} descriptors, {r['threads']} threads (at {r['elapsed_s']} s)"
print("start:        ", at(rows[0]))
print("after warm-up:", at(warm))
print("end:          ", at(rows[-1]))
print("max RSS after warm-up: %.1f MB" % (max(int(r["rss_kb"]) for r in rows[n // 10:]) / 1024))
rest = [(int(r["rss_kb"]) - int(r["password_memory_kb"] or 0)) / 1024 for r in rows[n // 10:]]
print("RSS less the argon2 buffers after warm-up: %.1f to %.1f MB" % (min(rest), max(rest)))
print("requests:", sum(int(r["requests"]) for r in rows), " unexpected:", sum(int(r["unexpected"]) for r in rows))
if sum(int(r["unexpected"]) for r in rows):
    sys.exit(1)
PY
echo "soak.csv, soak.png and audit.txt in $out"
