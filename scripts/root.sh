#!/usr/bin/env bash
# Debian roots for testing jobbuf on other PostgreSQL majors and Redis/Valkey versions than the
# Debian 12 machine's own. Each root is made once with debootstrap and cached outside the
# repository (JOBBUF_ROOTS, default /var/cache/jobbuf/roots/<name>); runs happen under chroot with
# /proc, /dev and /dev/shm bound. The mirror is read from the machine's apt sources at run time.
#
#   scripts/root.sh make NAME      make (or reuse) the root; exit 3 = NOT TESTED (reason printed)
#   scripts/root.sh run NAME CMD   run CMD (bash -c) inside the root, as root, with binds
#   scripts/root.sh copy NAME      copy the working tree (with its git history) into the root's
#                                  /build/jobbuf, without build products
#   scripts/root.sh path NAME      print the root's directory
#   scripts/root.sh pg NAME        print the PostgreSQL major the root carries
#   scripts/root.sh redis NAME     print the Redis server the root carries (redis or valkey)
#   scripts/root.sh of-major MAJOR print the root that carries PostgreSQL MAJOR (17, 18, 19)
#   scripts/root.sh mirror NAME    print the Debian mirror the machine's apt sources name
#   scripts/root.sh clean RELEASE DIR
#                                  make DIR a fresh copy of a clean root of RELEASE (bookworm,
#                                  trixie, forky): a debootstrap minbase with only the release's
#                                  main suite in its apt sources, made once and cached in
#                                  JOBBUF_ROOTS/clean-RELEASE (what a user's fresh install has)
#   scripts/root.sh enter DIR CMD  run CMD (bash -ec) inside the root at DIR (a clean copy), as
#                                  root, with binds, removed after it whatever the outcome
#   scripts/root.sh drop DIR       remove the root copy at DIR (its binds first; nothing is
#                                  removed while anything is still mounted below it)
#
# Roots (the Debian release's own packages; see docs/internals/testing.md):
#   trixie     Debian 13: PostgreSQL 17, Redis 8.0, Sidekiq 7.3, ActiveJob 7.2, Celery 5.5
#   forky      Debian testing (debootstrap's sid script): PostgreSQL 18, Valkey 9, Sidekiq 8.1,
#              Celery 5.6
#   bookworm-valkey  Debian 12 with its backports suite: PostgreSQL 15 and Valkey 8.0
#   forky-pg19 forky with Debian experimental: PostgreSQL 19 (a release candidate until 19 is
#              released; the preview part), Valkey 9; pgTAP is copied from forky's 18 package
#              (it is SQL only; experimental has no postgresql-19-pgtap)
# Run as root (debootstrap and chroot need it).
set -euo pipefail

ROOTS=${JOBBUF_ROOTS:-/var/cache/jobbuf/roots}
# Bumped whenever the package lists below change: a cached root with another stamp is remade.
ROOT_FORMAT=1

common_packages=(
  build-essential g++ make pkg-config ca-certificates git
  libhiredis-dev libssl-dev openssl libgtest-dev
  libtap-parser-sourcehandler-pgtap-perl
  ruby ruby-sidekiq ruby-pg ruby-redis ruby-activejob ruby-activerecord ruby-globalid
  ruby-minitest python3-celery python3-redis nodejs
  procps iproute2 util-linux
)

# root_spec NAME: sets SUITE, SCRIPT, PG, PACKAGES for a root name, and EXTRA_SUITE and
# EXTRA_PACKAGES: packages installed after debootstrap from another suite of the same mirror.
root_spec() {
  EXTRA_SUITE= EXTRA_PACKAGES=() REDIS=valkey
  case $1 in
    trixie)
      SUITE=trixie; SCRIPT=trixie; PG=17; REDIS=redis
      PACKAGES=(postgresql-17 postgresql-server-dev-17 postgresql-17-pgtap
                redis-server redis-tools redis-sentinel) ;;
    forky)
      SUITE=forky; SCRIPT=sid; PG=18
      PACKAGES=(postgresql-18 postgresql-server-dev-18 postgresql-18-pgtap
                valkey-server valkey-tools valkey-sentinel) ;;
    bookworm-valkey)
      SUITE=bookworm; SCRIPT=bookworm; PG=15
      PACKAGES=(postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap)
      EXTRA_SUITE=bookworm-backports EXTRA_PACKAGES=(valkey-server valkey-tools valkey-sentinel) ;;
    forky-pg19)
      SUITE=forky; SCRIPT=sid; PG=19
      PACKAGES=(valkey-server valkey-tools valkey-sentinel)
      EXTRA_SUITE=experimental EXTRA_PACKAGES=(postgresql-19 postgresql-server-dev-19) ;;
    *) echo "scripts/root.sh: no root named '$1' (trixie, forky, bookworm-valkey, forky-pg19)" >&2; exit 2 ;;
  esac
  PACKAGES=("${common_packages[@]}" "${PACKAGES[@]}")
}

# The Debian archive the machine's apt sources name (one-line or deb822 format): the first URI
# that serves the machine's own release (not its -security archive).
apt_mirror() {
  local release
  release=$(. /etc/os-release && echo "$VERSION_CODENAME")
  local files=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  local f
  for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    awk -v rel="$release" '
      /^[[:space:]]*deb[[:space:]]/ {
        i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i+1) == rel && $i !~ /security/) { print $i; exit }
      }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (j = 2; j <= NF; j++) if ($j == rel && uri !~ /security/) { print uri; exit } }
      /^[[:space:]]*$/ { uri = "" }
    ' "$f"
  done | head -n 1
}

not_tested() {
  echo "NOT TESTED: root '$NAME' ($SUITE) cannot be made: $*" >&2
  exit 3
}

bind_mounts() {
  local dir=$1 m
  for m in proc dev dev/shm; do
    mountpoint -q "$dir/$m" && continue
    mkdir -p "$dir/$m"
    case $m in
      proc) mount -t proc proc "$dir/proc" ;;
      *) mount --bind "/$m" "$dir/$m" ;;
    esac
  done
}

unbind_mounts() {
  local dir=$1 m
  for m in dev/shm dev proc; do
    mountpoint -q "$dir/$m" && umount -l "$dir/$m" || true
  done
}

in_root() {  # DIR CMD...
  local dir=$1; shift
  chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root \
    LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive "$@"
}

# pgTAP for a major that Debian packages no postgresql-<major>-pgtap for yet: the extension files
# (SQL only) of the suite's newest postgresql-<n>-pgtap, unpacked (installing it would pull in
# server n).
copy_pgtap() {
  local dir=$1 pkg
  pkg=$(in_root "$dir" apt-cache search --names-only '^postgresql-[0-9]+-pgtap$' | awk '{print $1}' | sort -V | tail -n 1)
  [ -n "$pkg" ] || { echo "no postgresql-<n>-pgtap in $SUITE"; return 1; }
  in_root "$dir" sh -c "cd /tmp && apt-get -o Acquire::Check-Valid-Until=false download $pkg && dpkg-deb -x ${pkg}_*.deb /tmp/pgtap &&
    cp /tmp/pgtap/usr/share/postgresql/*/extension/pgtap* /usr/share/postgresql/$PG/extension/ && rm -rf /tmp/pgtap /tmp/${pkg}_*.deb"
  echo "pgTAP for $PG: the extension files of $pkg"
}

make_root() {
  local dir=$ROOTS/$NAME
  local want
  want="$ROOT_FORMAT ${PACKAGES[*]} ${EXTRA_PACKAGES[*]}"
  if [ -f "$dir/.jobbuf-root" ] && [ "$(cat "$dir/.jobbuf-root")" = "$want" ]; then
    return 0
  fi
  command -v debootstrap >/dev/null ||
    { echo "scripts/root.sh: installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }
  local mirror
  mirror=$(apt_mirror)
  [ -n "$mirror" ] || not_tested "no Debian mirror found in /etc/apt/sources.list*"
  unbind_mounts "$dir" 2>/dev/null || true
  rm -rf "$dir" "$dir.new"
  mkdir -p "$ROOTS"
  local started=$SECONDS log=$ROOTS/$NAME.log
  echo "scripts/root.sh: making root '$NAME' ($SUITE from $mirror) in $dir"
  local includes
  includes=$(IFS=,; echo "${PACKAGES[*]}")
  if ! debootstrap --variant=minbase --include="$includes" "$SUITE" "$dir.new" "$mirror" \
        "/usr/share/debootstrap/scripts/$SCRIPT" >"$log" 2>&1; then
    local why
    why=$(grep -E 'E: |Couldn.t find|not found|Failure|Unable' "$log" | tail -n 3 | tr '\n' ' ')
    rm -rf "$dir.new"
    not_tested "debootstrap failed (${why:-see $log})"
  fi
  # The release's own sources inside the root (the packaging check installs from them).
  echo "deb $mirror $SUITE main" >"$dir.new/etc/apt/sources.list"
  if [ ${#EXTRA_PACKAGES[@]} -gt 0 ]; then
    echo "deb $mirror $EXTRA_SUITE main" >>"$dir.new/etc/apt/sources.list"
    bind_mounts "$dir.new"
    # The mirror may serve a copy of the archive older than its Release files' Valid-Until.
    local apt="apt-get -o Acquire::Check-Valid-Until=false"
    if ! in_root "$dir.new" sh -c "$apt update -qq && $apt install -y -qq -t $EXTRA_SUITE ${EXTRA_PACKAGES[*]}" \
          >>"$log" 2>&1; then
      unbind_mounts "$dir.new"
      local why
      why=$(grep -E '^E: ' "$log" | tail -n 2 | tr '\n' ' ')
      rm -rf "$dir.new"
      not_tested "$EXTRA_SUITE packages ${EXTRA_PACKAGES[*]} could not be installed (${why:-see $log})"
    fi
    [ "$EXTRA_SUITE" != experimental ] || copy_pgtap "$dir.new" >>"$log" 2>&1 ||
      { unbind_mounts "$dir.new"; rm -rf "$dir.new"; not_tested "pgTAP could not be copied from $SUITE (see $log)"; }
    unbind_mounts "$dir.new"
  fi
  # Debian's postinst made a cluster and a redis service config; runs use private ones only.
  rm -rf "$dir.new"/var/lib/postgresql/*/main "$dir.new"/etc/postgresql/*/main
  echo "$want" >"$dir.new/.jobbuf-root"
  mv "$dir.new" "$dir"
  echo "scripts/root.sh: root '$NAME' made in $((SECONDS - started)) s"
}

# clean_root RELEASE DIR: DIR becomes a copy of the cached clean root of RELEASE (made once; one
# maker at a time, under a lock).
clean_root() {
  local release=$1 dir=$2 pristine=$ROOTS/clean-$1 script=$1
  case $release in
    bookworm|trixie) ;;
    forky) script=sid ;;  # Debian testing: debootstrap's sid script
    *) echo "scripts/root.sh: no clean root for release '$release' (bookworm, trixie, forky)" >&2; exit 2 ;;
  esac
  mkdir -p "$ROOTS"
  exec 8>"$ROOTS/clean-$release.lock"
  flock 8
  if [ ! -f "$pristine/.jobbuf-clean" ]; then
    command -v debootstrap >/dev/null ||
      { echo "scripts/root.sh: installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }
    local mirror started=$SECONDS log=$ROOTS/clean-$release.log
    mirror=$(apt_mirror)
    [ -n "$mirror" ] || { echo "NOT TESTED: a clean $release root cannot be made: no Debian mirror found in /etc/apt/sources.list*"; exit 3; }
    echo "scripts/root.sh: making a clean $release root ($release from $mirror) in $pristine"
    drop_root "$pristine.new"
    if ! debootstrap --variant=minbase "$release" "$pristine.new" "$mirror" "/usr/share/debootstrap/scripts/$script" \
          >"$log" 2>&1; then
      drop_root "$pristine.new"
      echo "NOT TESTED: a clean $release root cannot be made (debootstrap failed; see $log)"
      exit 3
    fi
    echo "deb $mirror $release main" >"$pristine.new/etc/apt/sources.list"
    touch "$pristine.new/.jobbuf-clean"
    drop_root "$pristine"
    mv "$pristine.new" "$pristine"
    echo "scripts/root.sh: clean $release root made in $((SECONDS - started)) s"
  fi
  drop_root "$dir"
  cp -a "$pristine" "$dir"
  rm -f "$dir/.jobbuf-clean"
  exec 8>&-
}

# drop_root DIR: removes a root copy, after its binds; refuses while anything is mounted below it.
drop_root() {
  local dir=$1
  [ -e "$dir" ] || return 0
  dir=$(cd "$dir" && pwd -P)
  [ "$dir" != / ] || { echo "scripts/root.sh: refusing to remove /" >&2; exit 2; }
  unbind_mounts "$dir"
  if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    echo "scripts/root.sh: $dir still has mounts below it; not removed" >&2
    exit 1
  fi
  rm -rf "$dir"
}

# copy_tree DEST: the working tree this script belongs to, with its git history (the upgrade tests
# build old releases from it) and without build products, into DEST.
copy_tree() {
  local dest=$1 repo
  repo=$(cd "$(dirname "$0")/.." && pwd)
  rm -rf "$dest"
  mkdir -p "$dest"
  tar -C "$repo" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' --exclude=./results \
    --exclude=./output_iso --exclude=./tmp_check --exclude=./.run --exclude=./test/unit/obj \
    --exclude=./test/unit/jobbuf_unit_tests -cf - . | tar -C "$dest" -xf -
  cp -a "$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir)" "$dest/.git"
  git -C "$dest" config core.bare false
}

[ $# -ge 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 2; }
cmd=$1 NAME=$2
shift 2
case $cmd in
  mirror) apt_mirror; exit 0 ;;
  clean)
    [ $# -eq 1 ] || { echo "scripts/root.sh: clean RELEASE DIR" >&2; exit 2; }
    clean_root "$NAME" "$1"; exit 0 ;;
  drop) drop_root "$NAME"; exit 0 ;;
  enter)
    [ -f "$NAME/etc/debian_version" ] || { echo "scripts/root.sh: $NAME is no Debian root" >&2; exit 2; }
    dir=$(cd "$NAME" && pwd -P)
    trap 'unbind_mounts "$dir"' EXIT
    trap 'exit 130' INT TERM HUP
    bind_mounts "$dir"
    in_root "$dir" bash -ec "$*"
    exit ;;
esac
if [ "$cmd" = of-major ]; then
  case $NAME in
    17) echo trixie ;; 18) echo forky ;; 19) echo forky-pg19 ;;
    *) echo "scripts/root.sh: no root carries PostgreSQL $NAME (17, 18, 19; 15 is the machine's)" >&2; exit 2 ;;
  esac
  exit 0
fi
root_spec "$NAME"
case $cmd in
  make) make_root ;;
  path) echo "$ROOTS/$NAME" ;;
  copy) copy_tree "$ROOTS/$NAME/build/jobbuf" ;;
  pg) echo "$PG" ;;
  redis) echo "$REDIS" ;;
  run)
    dir=$ROOTS/$NAME
    [ -f "$dir/.jobbuf-root" ] || { echo "scripts/root.sh: root '$NAME' is not made" >&2; exit 2; }
    # One run at a time per root: the binds are made for a run and removed after it.
    exec 9>"$ROOTS/$NAME.lock"
    flock 9
    trap 'unbind_mounts "$dir"' EXIT
    trap 'exit 130' INT TERM HUP
    bind_mounts "$dir"
    in_root "$dir" bash -c "$*" 9>&- ;;  # servers a run leaves behind do not hold the lock
  *) echo "scripts/root.sh: unknown command '$cmd'" >&2; exit 2 ;;
esac
