# Test harness (sourced by bash): which Redis server the tests run. JB_REDIS=redis (the default)
# runs redis-server, redis-cli and redis-sentinel from PATH; JB_REDIS=valkey runs Valkey's under
# those names (links in /tmp/jobbuf-valkey-bin, first on PATH; REDIS_SERVER for the unit tests),
# so that every Redis-facing test runs unchanged against either server.
jb_use_redis_flavor() {
  case ${JB_REDIS:-redis} in
    redis) return 0 ;;
    valkey) ;;
    *) echo "JB_REDIS=$JB_REDIS: use redis or valkey" >&2; return 2 ;;
  esac
  local dir=/tmp/jobbuf-valkey-bin tool
  command -v valkey-server >/dev/null 2>&1 || { echo "JB_REDIS=valkey: valkey-server is not installed" >&2; return 1; }
  mkdir -p "$dir"
  for tool in server cli sentinel benchmark; do
    ln -sfn "$(command -v "valkey-$tool")" "$dir/redis-$tool"
  done
  case ":$PATH:" in *":$dir:"*) ;; *) PATH="$dir:$PATH" ;; esac
  export PATH REDIS_SERVER="$dir/redis-server"
}
jb_use_redis_flavor || exit 1
