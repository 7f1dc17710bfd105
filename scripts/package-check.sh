#!/usr/bin/env bash
# make package-check: builds postgresql-<major>-jobbuf with pg_buildext (debian/) for each major,
# in the Debian root of its release, then installs the .deb with apt into a clean root of that
# release (a fresh debootstrap minbase copy: nothing but what apt pulls in) and checks CREATE
# EXTENSION and one job delivered to the release's Redis (Valkey on forky).
#   scripts/package-check.sh [15|17|18]...   (default: all three)
# The .debs are left in JOBBUF_PACKAGES (default /var/cache/jobbuf/packages). Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
ROOTS=${JOBBUF_ROOTS:-/var/cache/jobbuf/roots}
OUT=${JOBBUF_PACKAGES:-/var/cache/jobbuf/packages}
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(15 17 18)

release_of() { case $1 in 15) echo bookworm ;; 17) echo trixie ;; 18) echo forky ;; *) echo "no major $1" >&2; exit 2 ;; esac; }
build_root_of() { case $1 in 15) echo bookworm-valkey ;; 17) echo trixie ;; 18) echo forky ;; esac; }
redis_package_of() { case $1 in 18) echo valkey-server ;; *) echo redis-server ;; esac; }
redis_binary_of() { case $1 in 18) echo valkey-server ;; *) echo redis-server ;; esac; }
free_port() { ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close'; }

# clean_root RELEASE DIR: a copy of a cached debootstrap minbase of RELEASE (made once).
clean_root() {
  local release=$1 dir=$2 pristine=$ROOTS/clean-$1
  if [ ! -f "$pristine/.jobbuf-clean" ]; then
    local mirror script=$1
    mirror=$(bash scripts/root.sh mirror "$release")
    [ "$release" = forky ] && script=sid
    rm -rf "$pristine"
    echo "package-check: making a clean $release root"
    debootstrap --variant=minbase "$release" "$pristine" "$mirror" "/usr/share/debootstrap/scripts/$script" \
      >"$ROOTS/clean-$release.log" 2>&1 || { echo "NOT TESTED: a clean $release root cannot be made (see $ROOTS/clean-$release.log)"; return 3; }
    echo "deb $mirror $release main" >"$pristine/etc/apt/sources.list"
    touch "$pristine/.jobbuf-clean"
  fi
  rm -rf "$dir"
  cp -a "$pristine" "$dir"
}

in_chroot() {  # DIR SCRIPT
  local dir=$1 m rc=0
  mount -t proc proc "$dir/proc"; mount --bind /dev "$dir/dev"; mount --bind /dev/shm "$dir/dev/shm"
  chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive bash -ec "$2" || rc=$?
  for m in dev/shm dev proc; do umount -l "$dir/$m"; done
  return $rc
}

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
      cd /build/pkg/jobbuf && pg_buildext updatecontrol >/dev/null && dpkg-buildpackage -b -us -uc >../build.log 2>&1 ||
        { tail -n 30 ../build.log; exit 1; }"; then
    echo "FAIL postgresql-$major-jobbuf does not build"; status=1; continue
  fi
  deb=$(ls "$dir"/build/pkg/postgresql-"$major"-jobbuf_*.deb)
  cp "$deb" "$OUT/"
  echo "built $OUT/$(basename "$deb")"

  check=$ROOTS/check-$release
  clean_root "$release" "$check" || { status=1; continue; }
  cp "$deb" "$check/tmp/"
  pgport=$(free_port); redisport=$(free_port)
  if in_chroot "$check" "
      apt-get -o Acquire::Check-Valid-Until=false update -qq && apt-get install -y -qq ./tmp/$(basename "$deb") $(redis_package_of "$major") >/dev/null 2>&1 </dev/null ||
        apt-get install -y ./tmp/$(basename "$deb") $(redis_package_of "$major") </dev/null
      # Only what this check started is stopped (the root shares the machine's process table).
      trap 'pg_ctlcluster $major check stop -m immediate 2>/dev/null; [ ! -f /tmp/redis.pid ] || kill \$(cat /tmp/redis.pid)' EXIT
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
      echo \"installed version: \$got; Redis got: \$job\"
      case \$job in *'\"hello\": \"$major\"'*|*'\"hello\":\"$major\"'*) ;; *) exit 1 ;; esac"; then
    echo "ok   postgresql-$major-jobbuf: apt install into a clean $release root, CREATE EXTENSION, one job delivered"
  else
    echo "FAIL postgresql-$major-jobbuf in a clean $release root"; status=1
  fi
  rm -rf "$check"
done
exit $status
