# Shared by the load scripts (benches/load.sh, benches/callgrind.sh, benches/idle.sh):
# sourced, not run. Expects $root (the repository) and $work (a scratch directory below
# target/, emptied here).

rm -rf "$work"
# Logs go below the configuration's directory, not into it: the file watcher watches that
# directory, and a log written there at every request would wake it at every request.
mkdir -p "$work/logs"

need() { command -v "$1" >/dev/null 2>&1; }

# Debian packages, installed when one of the commands is missing.
apt_install() {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Every server started with `started PID` is stopped on exit.
pids=()
started() { pids+=("$1"); }
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# wait_port PORT [tenths of a second]: until something listens on 127.0.0.1:PORT.
wait_port() {
  for _ in $(seq 1 "${2:-100}"); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  exit 1
}

# The small upstream every proxy under test forwards to: nginx on 127.0.0.1:18080 answering
# 200 with a small JSON body. `nginx_conf EXTRA_HTTP_BLOCK` writes $work/nginx.conf: one
# process (master_process off), its own prefix, no access log, the upstream and EXTRA.
nginx_conf() {
  nginx_conf_as nginx "
  server {
    listen 127.0.0.1:18080;
    keepalive_requests 1000000;
    location / { default_type application/json; return 200 '{\"ok\":true}'; }
  }
$1"
}

# nginx_conf_as NAME HTTP_BLOCK: $work/NAME.conf, one nginx process of its own (its pid file,
# error log and temporary directories named NAME) serving HTTP_BLOCK, no access log unless a
# server of HTTP_BLOCK sets one.
nginx_conf_as() {
  cat >"$work/$1.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
error_log $work/logs/$1-error.log warn;
pid $work/$1.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/$1-body;
  proxy_temp_path $work/$1-proxy;
  fastcgi_temp_path $work/$1-fastcgi;
  uwsgi_temp_path $work/$1-uwsgi;
  scgi_temp_path $work/$1-scgi;
$2
}
CONF
}

# nginx_tls_listen PORT: the first lines of an nginx server on 127.0.0.1:PORT terminating
# TLS 1.3 with the sandbox's server certificate; the caller's server block goes on.
nginx_tls_listen() {
  cat <<EOF
    listen 127.0.0.1:$1 ssl;
    ssl_protocols TLSv1.3;
    ssl_certificate $root/certs/server/cert.pem;
    ssl_certificate_key $root/certs/server/key.pem;
EOF
}

# gateway_config API GATEWAY ADMIN: gateway.toml with the upstream above, the endpoint's
# rate limit raised, absolute paths, and the listeners on the given ports.
gateway_config() {
  sed -e "s|upstream = \"sandbox-echo\"|upstream = \"http://127.0.0.1:18080\"|" \
    -e "s|requests = 15000, period_seconds = 300|requests = 1000000000, period_seconds = 1|" \
    -e "s|^enabled = true|enabled = true\ncerts = \"$root/certs\"|" \
    -e "s|\"certs/|\"$root/certs/|g" -e "s|\"registers/|\"$root/registers/|g" \
    -e "s|127.0.0.1:8080|127.0.0.1:$1|" -e "s|127.0.0.1:8443|127.0.0.1:$2|" \
    -e "s|127.0.0.1:9090|127.0.0.1:$3|" "$root/gateway.toml"
}

# The `valid` PSP's client certificate for oha, and the check endpoint's request for it.
tls=(--insecure --cert "$root/certs/psp/valid.pem" --key "$root/certs/psp/valid.key")
eidas=$(openssl x509 -in "$root/certs/psp/valid.pem" -outform DER | base64 -w0)
api_headers=(-H "Authorization: Basic c2FuZGJveDpzYW5kYm94" -H "fi_reference_id: LOAD-1"
  -H "eidas: $eidas")

# open_idle_clients N TENTHS: N keep-alive TLS connections to the gateway on 8443 as the
# `valid` PSP, one request each (benches/idle_clients.py), held open until
# close_idle_clients; waits TENTHS half-seconds at most for them, then 2 s more.
open_idle_clients() {
  local fifo="$work/hold"
  mkfifo "$fifo"
  python3 "$root/benches/idle_clients.py" 127.0.0.1 8443 "$1" \
    "$root/certs/psp/valid.pem" "$root/certs/psp/valid.key" <"$fifo" >"$work/clients.out" &
  idle_clients=$!
  exec 4>"$fifo"
  for _ in $(seq 1 "$2"); do
    grep -q '^open' "$work/clients.out" 2>/dev/null && break
    kill -0 "$idle_clients" 2>/dev/null || { echo "the clients failed" >&2; exit 1; }
    sleep 0.5
  done
  grep -q "^open $1\$" "$work/clients.out" || { cat "$work/clients.out" >&2; exit 1; }
  sleep 2
}

close_idle_clients() {
  exec 4>&-
  wait "$idle_clients" || true
}

# between_markers NAME FILE: replaces what BENCHMARKS.md holds between its `NAME:begin` and
# `NAME:end` markers with FILE's content.
between_markers() {
  python3 - "$1" "$2" "$root/BENCHMARKS.md" <<'PY'
import sys
name, table, path = sys.argv[1], open(sys.argv[2]).read().strip(), sys.argv[3]
text = open(path).read()
begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(f"{head}{begin}\n{table}\n{end}{tail}")
PY
}
