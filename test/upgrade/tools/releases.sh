# Earlier releases of jobbuf, built from git history exactly as their users run them (sourced by
# the upgrade scripts, and by bench/run.sh for its baseline phase; the caller sets E2E_ROOT, the
# repository, and defines say and fail). A release is built once per machine, commit, major and
# compat patch (kept under ${TMPDIR:-/tmp}/jobbuf-release-<commit>-<version>-<patch digest>), then
# installed over the current build; the caller puts the current build back with install_current.
#   install_release VERSION   # 1.0 (commit 26da9a3), 1.1 (commit 5b86380) or 1.2 (commit 6738a34);
#                             false on failure
#   install_current

release_commit() {
  case $1 in
    1.0) echo 26da9a3 ;;
    1.1) echo 5b86380 ;;
    1.2) echo 6738a34 ;;
    *) return 1 ;;
  esac
}

install_release() {
  local commit dir
  commit=$(release_commit "$1") || { fail "no release $1"; return 1; }
  if ! git -C "$E2E_ROOT" cat-file -e "$commit^{commit}" 2>/dev/null; then
    fail "git history with commit $commit is needed to build jobbuf $1 (a shallow clone?)"
    return 1
  fi
  # Kept per major and per compat patch (a changed patch builds the release again).
  dir=${TMPDIR:-/tmp}/jobbuf-release-$commit-$(pg_config --version | tr -dc '0-9.')-$(sha256sum "$E2E_ROOT/test/upgrade/compat/$1.patch" | cut -c1-8)
  if [ ! -f "$dir/.built" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    git -C "$E2E_ROOT" archive "$commit" | tar -x -C "$dir"
    say "building jobbuf $1 from commit $commit"
    # The release predates PostgreSQL 16 (and OpenSSL 3.5): on a later major (16 to 19) it is built
    # with the calls that changed named through src/pg_compat.h, as the current source does, and
    # nothing else.
    if [ "$(pg_config --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')" -ge 16 ]; then
      say "jobbuf $1 as released does not build on $(pg_config --version): building it with test/upgrade/compat/$1.patch (src/pg_compat.h only)"
      patch -s -d "$dir" -p1 <"$E2E_ROOT/test/upgrade/compat/$1.patch" || { fail "test/upgrade/compat/$1.patch applies to commit $commit"; return 1; }
    fi
    if ! make -C "$dir" -s -j"$(nproc)" >"$dir/build.log" 2>&1; then
      tail -n 20 "$dir/build.log"; fail "jobbuf $1 builds"; return 1
    fi
    touch "$dir/.built"
  fi
  make -C "$dir" -s install >>"$dir/build.log" 2>&1 || { fail "jobbuf $1 installs"; return 1; }
}

install_current() {
  make -C "$E2E_ROOT" -s install >/dev/null 2>&1
}
