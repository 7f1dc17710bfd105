#!/usr/bin/env bash
# Versions: 1.0's install script is still what commit 26da9a3 shipped, 1.1's what commit 5b86380
# built and 1.2's what commit 6738a34 built, 1.3 is the default, and a 1.0, 1.1 or 1.2 database
# brought to 1.3 by ALTER EXTENSION jobbuf UPDATE has exactly the catalog of a fresh CREATE
# EXTENSION jobbuf
# (test/upgrade/catalog.sql: tables, columns, defaults, indexes, constraints, triggers, functions
# with their definitions and settings, grants, comments, extension membership), and the same
# pg_dump --schema-only.
source "$(dirname "$0")/../e2e/tools/lib.sh"
ROOT=$E2E_ROOT

# Frozen releases: each install script's digest, and (where git history is at hand) the build of
# the release's commit.
frozen() {  # version commit digest
  local file="$ROOT/sql/jobbuf--$1.sql"
  expect_eq "sql/jobbuf--$1.sql is the frozen $1 script" "$(sha256sum "$file" | cut -d' ' -f1)" "$3"
  if git -C "$ROOT" cat-file -e "$2^{commit}" 2>/dev/null; then
    built=$(for part in $(git -C "$ROOT" ls-tree --name-only "$2" src/sql/ | grep '\.sql$' | sort); do
              git -C "$ROOT" show "$2:$part"; done | sha256sum | cut -d' ' -f1)
    expect_eq "sql/jobbuf--$1.sql is what commit $2 built" "$(sha256sum "$file" | cut -d' ' -f1)" "$built"
  else
    say "no git history here: only the recorded digest of $1 checked"
  fi
}
frozen 1.0 26da9a3 af0707afd938381430dab1a530a05374d94f6dd5611e77d08380e84a7d7d7942
frozen 1.1 5b86380 eeab3897a9127e91e80ad5f79bcd7ad84531ac32ea9029398617acc75b9d6bbc
frozen 1.2 6738a34 2673619b2d16b1078c1ce49b9399449d4c10db8e7dc832bf2e712275e97e5caa
CURRENT=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT/jobbuf.control")

e2e_start
expect_eq "default version" \
  "$(jb_sql "SELECT default_version FROM pg_available_extensions WHERE name = 'jobbuf'")" 1.3
expect_eq "versions on offer" \
  "$(jb_sql "SELECT string_agg(version, ' ' ORDER BY version) FROM pg_available_extension_versions WHERE name = 'jobbuf'")" \
  "1.0 1.1 1.2 1.3"

jb_psql_db postgres -q -c "CREATE DATABASE fresh"
jb_psql_db fresh -q -c "CREATE EXTENSION jobbuf"
jb_psql_db fresh -qtAX -f "$ROOT/test/upgrade/catalog.sql" >"$JB_RUN/fresh.catalog"
check "the catalog description is not empty ($(wc -l <"$JB_RUN/fresh.catalog") facts)" \
  [ "$(grep -c '^function ' "$JB_RUN/fresh.catalog")" -gt 20 ]

# pg_dump prints an extension's members only in binary-upgrade mode; OIDs aside, both must match.
dump_schema() {
  "$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres --schema-only --binary-upgrade "$1" |
    grep -v -e 'binary_upgrade_set_next' -e 'binary_upgrade_create_empty_extension' \
            -e 'relfrozenxid' -e "WHERE oid = '[0-9]*';" -e 'pg_attver=' \
            -e '^-- Dumped' -e '^-- Name: .*DATABASE' -e "^\\\\restrict" -e "^\\\\unrestrict"
}
dump_schema fresh >"$JB_RUN/fresh.dump"
check "pg_dump --binary-upgrade prints the extension's members" grep -q 'jobbuf_claim' "$JB_RUN/fresh.dump"

for from in 1.0 1.1 1.2; do
  db="from_${from/./_}"
  jb_psql_db postgres -q -c "CREATE DATABASE $db"
  jb_psql_db "$db" -q -c "CREATE EXTENSION jobbuf VERSION '$from'"
  expect_eq "CREATE EXTENSION jobbuf VERSION '$from' installs $from" \
    "$(jb_psql_db "$db" -qtAX -c "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" "$from"
  jb_psql_db "$db" -q -c "ALTER EXTENSION jobbuf UPDATE"
  expect_eq "ALTER EXTENSION jobbuf UPDATE from $from reaches $CURRENT" \
    "$(jb_psql_db "$db" -qtAX -c "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" "$CURRENT"
  jb_psql_db "$db" -qtAX -f "$ROOT/test/upgrade/catalog.sql" >"$JB_RUN/$db.catalog"
  if diff -u "$JB_RUN/fresh.catalog" "$JB_RUN/$db.catalog" >"$JB_RUN/$db.catalog.diff"; then
    pass "an updated $from has the catalog of a fresh $CURRENT"
  else
    fail "an updated $from differs from a fresh $CURRENT (- fresh, + updated):"
    head -n 60 "$JB_RUN/$db.catalog.diff" | sed 's/^/      /'
  fi
  dump_schema "$db" >"$JB_RUN/$db.dump"
  if diff -u <(sed 's/fresh/DB/g' "$JB_RUN/fresh.dump") <(sed "s/$db/DB/g" "$JB_RUN/$db.dump") >"$JB_RUN/$db.dump.diff"; then
    pass "pg_dump --schema-only prints the same schema for a fresh $CURRENT and an updated $from"
  else
    fail "pg_dump --schema-only differs between a fresh $CURRENT and an updated $from (- fresh, + updated):"
    head -n 60 "$JB_RUN/$db.dump.diff" | sed 's/^/      /'
  fi
done
e2e_done
