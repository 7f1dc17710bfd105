#!/usr/bin/env bash
# End-to-end: the Python client (clients/python) installed the way docs/clients.md says (a
# --system-site-packages venv over Debian's python3 packages, pip install --no-build-isolation),
# with a real Celery worker (test/consumers/celery). A Django project (test/clients/python/
# django_produce.py) and a SQLAlchemy script (sqlalchemy_produce.py) call task.delay /
# apply_async(eta=, countdown=, queue=) inside transactions, every 10th rolled back, and
# jobbuf.stage() on Django, SQLAlchemy, psycopg2 and psycopg 3 connections; the worker must run
# each committed task once, from its queue, not before its eta, no rolled-back one, with floats
# intact (verify.py). Refused options, a NUL character and unknown queues are checked too. A
# second database, orders, has jobbuf and its own drain worker: the Django project's 'orders' alias
# (atomic(using="orders") blocks, committed and rolled back, and two atomic aliases at once).
# The python is $JOBBUF_PYTHON, else the first python3 on PATH with Celery, Django, SQLAlchemy
# and both psycopgs, else /usr/bin/python3.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
source test/e2e/tools/lib.sh
source test/consumers/celery/celery.sh

source "$ROOT/test/clients/pick_python.sh"
PYTHON=$(pick_python "celery, django, sqlalchemy, psycopg2, psycopg")
export JB_CELERY_PYTHON=$PYTHON

cleanup() {
  jb_stop_celery || true
  e2e_cleanup
}
e2e_start "jobbuf.database = '$JB_DB, orders'"
trap cleanup EXIT
export PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB
export JOBBUF_CELERY_BROKER=redis://127.0.0.1:$JB_REDIS_PORT/0

# The install command of docs/clients.md, into this run's directory.
# (from a copy: pip builds inside the tree it installs)
VENV=$JB_RUN/venv
cp -r "$ROOT/clients/python" "$JB_RUN/python-client"
check "the package installs offline into a --system-site-packages venv ($PYTHON)" \
  bash -c "'$PYTHON' -m venv --system-site-packages '$VENV' && '$VENV/bin/pip' install --no-build-isolation --no-index '$JB_RUN/python-client' >'$JB_RUN/pip.log' 2>&1"

jb_psql -q >/dev/null <<'SQL'
SELECT jobbuf_create_queue('tasks', 'celery');
SELECT jobbuf_create_queue('crit', 'celery', '{"celery_queue": "critical"}');
SQL
jb_psql_db postgres -q -c "CREATE DATABASE orders" >/dev/null
jb_psql_db orders -q >/dev/null <<'SQL'
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('tasks', 'celery');
SQL
export JOBBUF_ORDERS_DB=orders
jb_start_celery "$JB_RUN/ran.jsonl" celery,critical
check "the Celery worker is ready" jb_wait_celery_ready 60

cd test/clients/python
for producer in django sqlalchemy; do
  status=0
  "$VENV/bin/python" ${producer}_produce.py "$JB_RUN/$producer.json" >"$JB_RUN/$producer.out" 2>&1 || status=$?
  sed 's/^/  /' "$JB_RUN/$producer.out"
  expect_eq "the $producer producer passed its checks" "$status" 0
done
runs=$(sed -n 's/^runs //p' "$JB_RUN/django.out" "$JB_RUN/sqlalchemy.out" | paste -sd+ | bc)

check "the worker ran the $runs committed tasks" jb_wait_until '[ "$(wc -l <"$JB_RUN/ran.jsonl")" -ge '"${runs:-1}"' ]' 60
# Drained: jobbuf delivered everything and both Celery lists are empty; kombu keeps a task with
# an eta it has taken in its unacked hash until it runs, so a duplicate would have run by now.
wait_staged 0
check "the orders database delivered everything too" jb_wait_until \
  '[ "$(jb_psql_db orders -qtAX -c "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 30
check "the Celery queues are drained" jb_wait_until \
  '[ "$(jb_redis EVAL "return redis.call(\"LLEN\",\"celery\")+redis.call(\"LLEN\",\"critical\")+redis.call(\"HLEN\",\"unacked\")" 0)" = 0 ]' 30
"$VENV/bin/python" verify.py "$JB_RUN/ran.jsonl" "$JB_RUN/django.json" "$JB_RUN/sqlalchemy.json" >"$JB_RUN/verify.out" 2>&1
status=$?
sed 's/^/  /' "$JB_RUN/verify.out"
expect_eq "what the Celery worker ran matches the committed tasks" "$status" 0
e2e_done
