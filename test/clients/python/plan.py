"""Shared by the Python client's end-to-end producers (django_produce.py, sqlalchemy_produce.py):
the producer's Celery app (the one-line change: task_cls="jobbuf.celery:Task"), the task the
worker in test/consumers/celery runs, checks, and the plan of what must run, written as JSON for
verify.py."""
import json
import os
import time

from celery import Celery

app = Celery("jobbuf_e2e_producer", broker=os.environ["JOBBUF_CELERY_BROKER"], task_cls="jobbuf.celery:Task")
app.conf.task_serializer = "json"


@app.task(name="jobbuf_e2e.record")
def record(*args, **kwargs):
    """Run by the worker (test/consumers/celery/jobbuf_e2e_tasks.py defines the same name)."""


failures = 0


def check(ok, what, detail=""):
    global failures
    print(("ok - " if ok else "not ok - ") + what + ("" if ok or not detail else f": {detail}"))
    if not ok:
        failures += 1


def expect_error(what, fn, needle, error=Exception):
    try:
        fn()
    except error as e:  # noqa: BLE001 - the check reports any other error as a failure
        check(needle in str(e), what, str(e))
    else:
        check(False, what, "no error")


class Rollback(Exception):
    pass


class Plan:
    def __init__(self, via):
        self.via = via
        self.jobs = []

    def job(self, token, queue="celery", not_before=None, floats=False):
        entry = {"token": f"{self.via}-{token}", "queue": queue, "not_before": not_before, "floats": floats}
        return entry

    def record_args(self, entry):
        args = [entry["token"], {"text": "é ✓ \"q\""}]
        if entry["floats"]:
            args.append([1e16, 1.5, -2.5e20])
        return args

    def done(self, entries, committed):
        for e in entries:
            self.jobs.append(dict(e, committed=committed))

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.jobs, f)
        committed = sum(1 for j in self.jobs if j["committed"])
        print(f"# {self.via}: planned {len(self.jobs)} tasks, {committed} committed")
        print(f"runs {committed}")


def soon(seconds):
    return time.time() + seconds
