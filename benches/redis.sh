# Shared by benches/load-shared.sh and benches/login-flood.sh: sourced, not run.
#
# start_bench_redis DIR starts Debian's redis-server on a free loopback port with DIR as its
# directory: no persistence, the default user off, and one ACL user `gateway` (its password
# `bench-password`, also written to DIR/password for [shared_state] password_file) with the
# commands the shared counters use. Sets $port and $redis_pid, and returns once it answers.
start_bench_redis() {
  local dir=$1
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'bench-password\n' >"$dir/password"
  cat >"$dir/redis.conf" <<EOF
bind 127.0.0.1
port $port
dir $dir
save ""
appendonly no
user default off
user gateway on >bench-password ~* +get +set +time +hmget +hset +pexpire +del +evalsha +script|load +eval +info
EOF
  redis-server "$dir/redis.conf" >"$dir/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 50); do
    # TIME, not PING: the ACL grants the user only what the counters use.
    redis-cli -p "$port" --user gateway --pass bench-password --no-auth-warning time 2>/dev/null | grep -qE '^[0-9]+$' && return 0
    sleep 0.1
  done
  echo "redis-server did not answer on 127.0.0.1:$port (see $dir/redis.log)" >&2
  return 1
}
