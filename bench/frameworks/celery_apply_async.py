#!/usr/bin/python3
# Baseline for the `celery` target: how fast Celery's own producer enqueues, apply_async in a
# loop (Debian 12's python3-celery 5.2, Redis broker). Prints one line:
#   celery_apply_async tasks=N seconds=S tasks_per_s=R
# Needs an empty Redis queue `bench` (purged first). Run with /usr/bin/python3 (Debian's Celery).
#
#   /usr/bin/python3 bench/frameworks/celery_apply_async.py redis://127.0.0.1:PORT/0 [tasks=100000]
import sys
import time

from celery import Celery

url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"
total = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
app = Celery("bench", broker=url)


@app.task(name="bench.record")
def record(i, user, amount):
    return None


with app.connection_for_write() as conn:
    conn.default_channel.client.delete("bench")
    started = time.perf_counter()
    for i in range(total):
        record.apply_async((i, "user-%d" % i, 42), queue="bench", connection=conn)
    seconds = time.perf_counter() - started
    queued = conn.default_channel.client.llen("bench")
if queued != total:
    sys.exit("expected %d queued tasks, found %d" % (total, queued))
print("celery_apply_async tasks=%d seconds=%.2f tasks_per_s=%d" % (total, seconds, total / seconds))
