# Builds and pushes Celery task messages the way jobbuf's `celery` target does
# (docs/formats/celery.md): protocol 2, JSON body base64-encoded, envelope as kombu's Redis
# transport writes it, task id a UUID derived from the installation salt and the jobbuf id.
# Used by test/consumers/checks_frameworks.sh to prove a real Celery worker runs such messages;
# the C++ encoder must produce the same bytes for the same inputs.
#
#   /usr/bin/python3 reference_message.py URL QUEUE SALT_HEX JOBS_JSON
#     JOBS_JSON: [{"id": 42, "task": "...", "args": [...], "kwargs": {...}, "run_at": epoch|null,
#                  "priority": 0..9 (optional)}]
#   pushes them in one MULTI/EXEC unit (with a stand-in batch marker) and prints each task id.
import base64
import datetime
import json
import socket
import sys

import redis

SEP = "\x06\x16"
PRIORITY_STEPS = [0, 3, 6, 9]
EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def jobbuf_uuid(salt, job_id, kind):
    """salt: 32-bit installation salt; kind: 0 task id, 1 delivery tag. RFC 9562 version 8:
    ssssssss-6a62-8k00-8iii-iiiiiiiiiiii (i = the job id, < 2**62, in the last 62 bits)."""
    low = 0x8000000000000000 | job_id
    return "%08x-6a62-8%x00-%04x-%012x" % (salt, kind, low >> 48, low & 0xFFFFFFFFFFFF)


def iso_utc(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat()


def queue_key(queue, priority):
    step = max(s for s in PRIORITY_STEPS if s <= min(max(priority, 0), 9))
    return queue if step == 0 else f"{queue}{SEP}{step}"


def message(queue, salt, job):
    task_id = jobbuf_uuid(salt, job["id"], 0)
    args, kwargs = job.get("args", []), job.get("kwargs", {})
    body = json.dumps([args, kwargs, EMBED], separators=(",", ":"))
    eta = iso_utc(job["run_at"]) if job.get("run_at") else None
    headers = {
        "lang": "py", "task": job["task"], "id": task_id, "shadow": None, "eta": eta,
        "expires": None, "group": None, "group_index": None, "retries": 0,
        "timelimit": [None, None], "root_id": task_id, "parent_id": None,
        "argsrepr": json.dumps(args, separators=(",", ":")),
        "kwargsrepr": json.dumps(kwargs, separators=(",", ":")),
        "origin": "jobbuf@" + socket.gethostname(), "ignore_result": False,
    }
    properties = {
        "correlation_id": task_id, "delivery_mode": 2,
        "delivery_info": {"exchange": "", "routing_key": queue},
        "priority": job.get("priority", 0), "body_encoding": "base64",
        "delivery_tag": jobbuf_uuid(salt, job["id"], 1),
    }
    envelope = {
        "body": base64.b64encode(body.encode()).decode(), "content-encoding": "utf-8",
        "content-type": "application/json", "headers": headers, "properties": properties,
    }
    return task_id, json.dumps(envelope, separators=(",", ":"))


def main():
    url, queue, salt, jobs_file = sys.argv[1], sys.argv[2], int(sys.argv[3], 16), sys.argv[4]
    with open(jobs_file) as f:
        jobs = json.load(f)
    r = redis.Redis.from_url(url)
    pipe = r.pipeline(transaction=True)
    ids = []
    for job in jobs:
        task_id, text = message(queue, salt, job)
        pipe.lpush(queue_key(queue, job.get("priority", 0)), text)
        ids.append(task_id)
    pipe.set(f"jobbuf:check:marker:{queue}", "1")
    pipe.execute()
    print("\n".join(ids))


if __name__ == "__main__":
    main()
