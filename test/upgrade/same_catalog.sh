#!/usr/bin/env bash
# Versions: 1.0's install script is still what commit 26da9a3 shipped, 1.1 is the default, and a
# 1.0 database brought to 1.1 by ALTER EXTENSION jobbuf UPDATE has exactly the catalog of a fresh
# CREATE EXTENSION jobbuf (test/upgrade/catalog.sql: tables, columns, defaults, indexes,
# constraints, triggers, functions with their definitions and settings, grants, comments,
# extension membership), and the same pg_dump --schema-only.
source "$(dirname "$0")/../e2e/tools/lib.sh"
ROOT=$E2E_ROOT

# 1.0 frozen: the file's digest, and (where git history is at hand) the build of commit 26da9a3.
expect_eq "sql/jobbuf--1.0.sql is the frozen 1.0 script" \
  "$(sha256sum "$ROOT/sql/jobbuf--1.0.sql" | cut -d' ' -f1)" \
  af0707afd938381430dab1a530a05374d94f6dd5611e77d08380e84a7d7d7942
if git -C "$ROOT" cat-file -e 26da9a3^{commit} 2>/dev/null; then
  built=$(for part in $(git -C "$ROOT" ls-tree --name-only 26da9a3 src/sql/ | sort); do
            git -C "$ROOT" show "26da9a3:$part"; done | sha256sum | cut -d' ' -f1)
  expect_eq "sql/jobbuf--1.0.sql is what commit 26da9a3 built" \
    "$(sha256sum "$ROOT/sql/jobbuf--1.0.sql" | cut -d' ' -f1)" "$built"
else
  say "no git history here: only the recorded digest checked"
fi

e2e_start
expect_eq "default version" \
  "$(jb_sql "SELECT default_version FROM pg_available_extensions WHERE name = 'jobbuf'")" 1.1
expect_eq "versions on offer" \
  "$(jb_sql "SELECT string_agg(version, ' ' ORDER BY version) FROM pg_available_extension_versions WHERE name = 'jobbuf'")" \
  "1.0 1.1"

jb_psql_db postgres -q -c "CREATE DATABASE fresh" -c "CREATE DATABASE updated"
jb_psql_db fresh -q -c "CREATE EXTENSION jobbuf"
jb_psql_db updated -q -c "CREATE EXTENSION jobbuf VERSION '1.0'"
expect_eq "CREATE EXTENSION jobbuf VERSION '1.0' installs 1.0" \
  "$(jb_psql_db updated -qtAX -c "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" 1.0
jb_psql_db updated -q -c "ALTER EXTENSION jobbuf UPDATE"
expect_eq "ALTER EXTENSION jobbuf UPDATE reaches 1.1" \
  "$(jb_psql_db updated -qtAX -c "SELECT extversion FROM pg_extension WHERE extname = 'jobbuf'")" 1.1

jb_psql_db fresh -qtAX -f "$ROOT/test/upgrade/catalog.sql" >"$JB_RUN/fresh.catalog"
jb_psql_db updated -qtAX -f "$ROOT/test/upgrade/catalog.sql" >"$JB_RUN/updated.catalog"
check "the catalog description is not empty ($(wc -l <"$JB_RUN/fresh.catalog") facts)" \
  [ "$(grep -c '^function ' "$JB_RUN/fresh.catalog")" -gt 20 ]
if diff -u "$JB_RUN/fresh.catalog" "$JB_RUN/updated.catalog" >"$JB_RUN/catalog.diff"; then
  pass "an updated 1.0 has the catalog of a fresh 1.1"
else
  fail "an updated 1.0 differs from a fresh 1.1 (- fresh, + updated):"
  head -n 60 "$JB_RUN/catalog.diff" | sed 's/^/      /'
fi

# pg_dump prints an extension's members only in binary-upgrade mode; OIDs aside, both must match.
dump_schema() {
  "$JB_PGBIN/pg_dump" -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres --schema-only --binary-upgrade "$1" |
    grep -v -e 'binary_upgrade_set_next' -e 'binary_upgrade_create_empty_extension' \
            -e 'relfrozenxid' -e "WHERE oid = '[0-9]*';" -e 'pg_attver=' \
            -e '^-- Dumped' -e '^-- Name: .*DATABASE' -e "^\\\\restrict" -e "^\\\\unrestrict"
}
dump_schema fresh >"$JB_RUN/fresh.dump"
dump_schema updated >"$JB_RUN/updated.dump"
check "pg_dump --binary-upgrade prints the extension's members" grep -q 'jobbuf_claim' "$JB_RUN/fresh.dump"
if diff -u <(sed 's/fresh/DB/g' "$JB_RUN/fresh.dump") <(sed 's/updated/DB/g' "$JB_RUN/updated.dump") >"$JB_RUN/dump.diff"; then
  pass "pg_dump --schema-only prints the same schema for both"
else
  fail "pg_dump --schema-only differs (- fresh, + updated):"
  head -n 60 "$JB_RUN/dump.diff" | sed 's/^/      /'
fi
e2e_done
