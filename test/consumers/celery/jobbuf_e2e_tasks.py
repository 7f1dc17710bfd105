# A tiny, real Celery application used by jobbuf's end-to-end tests of the `celery` target. It runs
# under Debian 12's unmodified Celery 5.2 worker (python3-celery, Redis broker via python3-redis):
#
#   JOBBUF_CELERY_BROKER=redis://127.0.0.1:PORT/0 JOBBUF_E2E_LOG=/tmp/ran.jsonl \
#     /usr/bin/python3 -m celery -A jobbuf_e2e_tasks worker -Q celery -c 2
#
# Every task execution appends one JSON line to $JOBBUF_E2E_LOG with what Celery itself parsed
# from the message (task id, task name, args, kwargs, eta, retries, delivery_info) and the time it
# ran (epoch seconds), so a test proves exactly-once execution, routing and `eta` from outside.
# Only configuration is set here: Celery's own code is used as shipped.
import fcntl
import json
import os
import time

from celery import Celery

app = Celery("jobbuf_e2e_tasks", broker=os.environ.get("JOBBUF_CELERY_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
)
# Fault tests: JOBBUF_CELERY_ACKS_LATE=1 acknowledges a task after it ran (so a worker killed
# mid-task loses nothing: the task runs again), and JOBBUF_CELERY_VISIBILITY_TIMEOUT (seconds)
# shortens kombu's wait before it restores a dead worker's unacknowledged messages (1 hour).
if os.environ.get("JOBBUF_CELERY_ACKS_LATE") == "1":
    app.conf.task_acks_late = True
if os.environ.get("JOBBUF_CELERY_VISIBILITY_TIMEOUT"):
    app.conf.broker_transport_options = {"visibility_timeout": int(os.environ["JOBBUF_CELERY_VISIBILITY_TIMEOUT"])}

LOG = os.environ.get("JOBBUF_E2E_LOG", "/dev/null")
# JOBBUF_E2E_WORK_MS: each task sleeps this long after recording itself (fault tests kill the
# worker while tasks are in flight).
WORK_SECONDS = int(os.environ.get("JOBBUF_E2E_WORK_MS", "0")) / 1000.0


def record(task, args, kwargs, kind="run"):
    req = task.request
    line = {
        "kind": kind,
        "task_id": req.id,
        "task": task.name,
        "args": list(args),
        "kwargs": kwargs,
        "eta": req.eta,
        "retries": req.retries,
        "routing_key": (req.delivery_info or {}).get("routing_key"),
        "priority": (req.delivery_info or {}).get("priority"),
        "ran_at": time.time(),
    }
    with open(LOG, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(line) + "\n")
        f.flush()


@app.task(name="jobbuf_e2e.record", bind=True)
def record_task(self, *args, **kwargs):
    """Records its own execution: the task an `each` delivery test sends."""
    record(self, args, kwargs)
    if WORK_SECONDS:
        time.sleep(WORK_SECONDS)


@app.task(name="jobbuf_e2e.group", bind=True)
def group_task(self, group_id):
    """Records a `delivery: group` task (its only argument is the group id); the test reads and
    finishes the group through SQL (jobbuf_group / jobbuf_complete) with the recorded id."""
    record(self, [group_id], {}, kind="group")
