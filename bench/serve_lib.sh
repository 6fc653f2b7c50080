# Sourced by bench/queue.sh and bench/service.sh: a `corral serve` on loopback for a benchmark.
#
#   start_server CORRAL WORKDIR [serve flags...]  sets server_pid, addr (HOST:PORT) and admin (the
#                                                 first-start admin token); WORKDIR holds
#                                                 config.toml and data/, and gets server.log
#   stop_server                                   SIGTERM and wait (safe to call twice)
server_pid=""
start_server() {
  local corral=$1 work=$2
  shift 2
  CORRAL_LOG=warn "$corral" serve --config "$work/config.toml" --data "$work/data" \
    --listen 127.0.0.1:0 "$@" 2>"$work/server.log" &
  server_pid=$!
  addr=""
  for _ in $(seq 1 300); do
    addr="$(sed -n 's|.*listening on http://\([^ ]*\).*|\1|p' "$work/server.log" | head -1)"
    [ -n "$addr" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$addr" ] || { cat "$work/server.log" >&2; echo "bench: the server did not start" >&2; return 1; }
  admin="$(sed -n 's|.*admin token (shown once, stored hashed): \(corral_[0-9a-f]*\).*|\1|p' "$work/server.log")"
}
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
