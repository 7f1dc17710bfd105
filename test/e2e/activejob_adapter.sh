#!/usr/bin/env bash
# The Ruby gem's own minitest tests (clients/ruby/test/*_test.rb: the :jobbuf ActiveJob adapter,
# its SQL, transactions, errors, enqueue_all, and parity with ActiveJob's Sidekiq adapter), run
# with Debian's ruby-minitest against the harness's private Postgres with the jobbuf extension.
set -uo pipefail
cd "$(dirname "$0")/../.."
source test/e2e/tools/lib.sh

e2e_start
export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB
cd clients/ruby
if ruby -Ilib -Itest -e 'Dir["test/*_test.rb"].sort.each { |f| require File.expand_path(f) }'; then
  pass "minitest: every test of the jobbuf gem passed"
else
  fail "minitest: the jobbuf gem's tests failed (see above)"
fi
e2e_done
