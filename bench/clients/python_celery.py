"""Benchmark of the Python client (`make bench` phase `clients`): tasks/s from ONE Python process
of a psycopg2 transaction that inserts a row and applies a Celery task, through
jobbuf.celery.Task (staged in the transaction; jobbuf's worker, running, delivers after the
commit) versus Celery's own apply_async (published to Redis from inside the transaction). Rounds
alternate the two; prints each figure and key=value lines of the best.
    PGHOST=... PYTHONPATH=clients/python python3 python_celery.py REDIS_URL [seconds=5] [rounds=2]
Needs the jobbuf queue bench_clients_cq (celery_queue "bench_clients") and the table
bench_clients_users (bench/run.sh creates them)."""
import sys
import time

import psycopg2
import redis
from celery import Celery

import jobbuf.celery

broker, seconds, rounds = sys.argv[1], float(sys.argv[2] if len(sys.argv) > 2 else 5), int(sys.argv[3] if len(sys.argv) > 3 else 2)
staged_app = Celery("bench_jobbuf", broker=broker, task_cls="jobbuf.celery:Task")
own_app = Celery("bench_own", broker=broker)


@staged_app.task(name="bench.welcome")
def staged_welcome(user_id, email, plan):
    pass


@own_app.task(name="bench.welcome")
def own_welcome(user_id, email, plan):
    pass


conn = psycopg2.connect("")
r = redis.Redis.from_url(broker)
counter = [0]


def one(task, bound):
    counter[0] += 1
    n = counter[0]
    with conn:  # a transaction: commits at the end of the block
        with conn.cursor() as cur:
            cur.execute("INSERT INTO bench_clients_users (email) VALUES (%s)", [f"customer-{n}@example.com"])
        if bound:
            with jobbuf.celery.transaction(conn):
                task.apply_async((n, f"customer-{n}@example.com", "pro"), queue="bench_clients")
        else:
            task.apply_async((n, f"customer-{n}@example.com", "pro"), queue="bench_clients_own")


def measure(name):
    task, bound = (staged_welcome, True) if name == "jobbuf" else (own_welcome, False)
    r.delete("bench_clients_own")
    with conn, conn.cursor() as cur:
        cur.execute("TRUNCATE bench_clients_users")
    for _ in range(50):
        one(task, bound)
    done = 0
    started = time.monotonic()
    while (now := time.monotonic()) < started + seconds:
        for _ in range(20):
            one(task, bound)
        done += 20
    return done / (now - started)


best = {}
for rnd in range(rounds):
    for name in (("jobbuf", "celery") if rnd % 2 == 0 else ("celery", "jobbuf")):
        rate = measure(name)
        print(f"celery round {rnd + 1}, {name}: {rate:.0f} tasks/s")
        best[name] = max(best.get(name, 0), rate)
r.delete("bench_clients_own")
for name, rate in best.items():
    print(f"clients_celery_{name}={rate:.1f}")
