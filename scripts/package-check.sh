#!/usr/bin/env bash
# make package-check: builds postgresql-<major>-jobbuf with pg_buildext (debian/) for each major,
# in the Debian root of its release, then installs the .deb with apt into a clean root of that
# release (a fresh debootstrap minbase copy: nothing but what apt pulls in; scripts/root.sh clean)
# and checks CREATE EXTENSION and one job delivered to the release's Redis (Valkey on forky).
# 19 is built in the forky-pg19 root and checked in a clean forky root to which Debian experimental
# (the same mirror) is added for PostgreSQL 19 only, as a user would add it: an apt pin gives the
# packages of source postgresql-19 (postgresql-19, postgresql-client-19, libpq5 19) their
# experimental versions; everything else comes from forky (experimental stays NotAutomatic).
# Each build makes the one major it checks (PG_SUPPORTED_VERSIONS; forky's default is 18).
#   scripts/package-check.sh [15|17|18|19]...   (default: all four)
# The .debs are left in JOBBUF_PACKAGES (default /var/cache/jobbuf/packages). Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
ROOTS=${JOBBUF_ROOTS:-/var/cache/jobbuf/roots}
OUT=${JOBBUF_PACKAGES:-/var/cache/jobbuf/packages}
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(15 17 18 19)

release_of() { case $1 in 15) echo bookworm ;; 17) echo trixie ;; 18|19) echo forky ;; *) echo "no major $1" >&2; exit 2 ;; esac; }
build_root_of() { case $1 in 15) echo bookworm-valkey ;; 17) echo trixie ;; 18) echo forky ;; 19) echo forky-pg19 ;; esac; }
# The suite a user adds to the release's sources for the major (none: the release carries it).
extra_suite_of() { case $1 in 19) echo experimental ;; esac; }
redis_package_of() { case $1 in 18|19) echo valkey-server ;; *) echo redis-server ;; esac; }
redis_binary_of() { case $1 in 18|19) echo valkey-server ;; *) echo redis-server ;; esac; }
free_port() { ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close'; }
for major in "${majors[@]}"; do release_of "$major" >/dev/null; done

# The clean root being checked: removed (binds first) whatever the outcome.
check=
trap '[ -z "$check" ] || bash scripts/root.sh drop "$check"' EXIT
trap 'exit 130' INT TERM HUP

mkdir -p "$OUT"
status=0
for major in "${majors[@]}"; do
  release=$(release_of "$major")
  build=$(build_root_of "$major")
  echo "=== postgresql-$major-jobbuf ($release)"
  bash scripts/root.sh make "$build" || { echo "NOT TESTED: postgresql-$major-jobbuf (no $build root)"; status=1; continue; }
  dir=$ROOTS/$build
  rm -rf "$dir/build/pkg"; mkdir -p "$dir/build/pkg/jobbuf"
  git ls-files -z | tar -C "$REPO" --null -T - -cf - | tar -C "$dir/build/pkg/jobbuf" -xf -
  if ! bash scripts/root.sh run "$build" "
      apt-get install -y -qq debhelper postgresql-server-dev-all dpkg-dev >/dev/null
      export PG_SUPPORTED_VERSIONS=$major
      cd /build/pkg/jobbuf && pg_buildext updatecontrol >/dev/null && dpkg-buildpackage -b -us -uc >../build.log 2>&1 ||
        { tail -n 30 ../build.log; exit 1; }"; then
    echo "FAIL postgresql-$major-jobbuf does not build"; status=1; continue
  fi
  deb=$(ls "$dir"/build/pkg/postgresql-"$major"-jobbuf_*.deb)
  cp "$deb" "$OUT/"
  echo "built $OUT/$(basename "$deb")"

  check=$ROOTS/check-$major
  bash scripts/root.sh clean "$release" "$check" || { echo "NOT TESTED: postgresql-$major-jobbuf (no clean $release root)"; status=1; check=; continue; }
  extra=$(extra_suite_of "$major")
  if [ -n "$extra" ]; then
    echo "deb $(bash scripts/root.sh mirror "$release") $extra main" >>"$check/etc/apt/sources.list"
    printf 'Package: src:postgresql-%s\nPin: release a=%s\nPin-Priority: 500\n' "$major" "$extra" \
      >"$check/etc/apt/preferences.d/postgresql-$major"
  fi
  cp "$deb" "$check/tmp/"
  pgport=$(free_port); redisport=$(free_port)
  if bash scripts/root.sh enter "$check" "
      apt-get -o Acquire::Check-Valid-Until=false update -qq && apt-get install -y -qq ./tmp/$(basename "$deb") $(redis_package_of "$major") >/dev/null 2>&1 </dev/null ||
        apt-get install -y ./tmp/$(basename "$deb") $(redis_package_of "$major") </dev/null
      # What apt took from the added suite: the packages of source postgresql-$major only.
      if [ -n '$extra' ]; then
        from=\$(apt list --installed 2>/dev/null | grep '^[^/]*/$extra,now ' | cut -d/ -f1 | tr '\n' ' ')
        echo \"from $extra: \$from\"
        for p in \$from; do
          [ \"\$(dpkg-query -W -f '\${source:Package}' \$p)\" = postgresql-$major ] || { echo \"apt took \$p from $extra\"; exit 1; }
        done
      fi
      # Only what this check started is stopped (the root shares the machine's process table).
      trap 'pg_ctlcluster $major check stop -m immediate 2>/dev/null; [ ! -f /tmp/redis.pid ] || kill \$(cat /tmp/redis.pid)' EXIT
      trap 'exit 130' INT TERM HUP
      $(redis_binary_of "$major") --port $redisport --bind 127.0.0.1 --save '' --daemonize yes --logfile /tmp/redis.log \
        --pidfile /tmp/redis.pid
      pg_dropcluster --stop $major main 2>/dev/null || true
      pg_createcluster -p $pgport $major check -- --auth=trust >/dev/null
      cat >>/etc/postgresql/$major/check/postgresql.conf <<CONF
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'jobbuf'
jobbuf.database = 'shop'
jobbuf.redis_url = 'redis://127.0.0.1:$redisport/0'
CONF
      pg_ctlcluster $major check start
      psql() { runuser -u postgres -- /usr/lib/postgresql/$major/bin/psql -X -q -p $pgport -v ON_ERROR_STOP=1 \"\$@\"; }
      psql -d postgres -c 'CREATE DATABASE shop'
      psql -d shop -c 'CREATE EXTENSION jobbuf' -c \"SELECT jobbuf_create_queue('mail', 'list')\" \\
        -c \"SELECT jobbuf_stage('mail', '{\\\"hello\\\": \\\"$major\\\"}')\" >/dev/null
      got=
      for _ in \$(seq 1 100); do
        got=\$(psql -d shop -tA -c \"SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'\")
        job=\$($(redis_binary_of "$major" | sed 's/-server$/-cli/') -p $redisport LPOP jobbuf:mail)
        case \$job in *hello*) break ;; esac
        sleep 0.1
      done
      echo \"server \$(psql -d shop -tA -c 'SHOW server_version'), jobbuf \$got; Redis got: \$job\"
      case \$job in *'\"hello\": \"$major\"'*|*'\"hello\":\"$major\"'*) ;; *) exit 1 ;; esac"; then
    echo "ok   postgresql-$major-jobbuf: apt install into a clean $release root, CREATE EXTENSION, one job delivered"
  else
    echo "FAIL postgresql-$major-jobbuf in a clean $release root"; status=1
  fi
  bash scripts/root.sh drop "$check"
  check=
done
exit $status
