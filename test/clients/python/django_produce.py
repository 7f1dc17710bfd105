"""Django producer of the Python client's end-to-end test (test/e2e/clients_python.sh):
record.delay / apply_async(args, kwargs, eta=, countdown=, queue=) inside transaction.atomic(),
every 10th atomic block rolled back, with an Order created next to each task; jobbuf.stage() on
Django's connection; the refusals; Celery's own publish outside any atomic block.
    python django_produce.py EXPECTED.json"""
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "django_project"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
import django  # noqa: E402

django.setup()
from django.db import connection, transaction  # noqa: E402

import jobbuf  # noqa: E402
import jobbuf.celery  # noqa: E402
from plan import Plan, Rollback, check, expect_error, record, soon  # noqa: E402
from shop.models import Order  # noqa: E402

print(f"# Django {django.get_version()}, Celery {__import__('celery').__version__}")
with connection.schema_editor() as editor:
    editor.create_model(Order)

plan = Plan("django")
for n in range(50):
    rolled_back = n % 10 == 4
    entries = []
    try:
        with transaction.atomic():
            kind = n % 5
            if kind == 0:
                e = plan.job(n, floats=True)
                result = record.delay(*plan.record_args(e))
                check(isinstance(result, jobbuf.celery.StagedTask) and result.jobbuf_id > 0, "delay() inside atomic stages the task") if n == 0 else None
            elif kind == 1:
                e = plan.job(n, not_before=soon(2))
                record.apply_async(plan.record_args(e), {"n": n}, countdown=2)
            elif kind == 2:
                e = plan.job(n, not_before=soon(2))
                record.apply_async(plan.record_args(e), eta=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2))
            elif kind == 3:
                e = plan.job(n, queue="critical")
                record.apply_async(plan.record_args(e), queue="critical")
            else:
                # jobbuf.stage() on Django's connection, with the celery target's payload.
                e = plan.job(n)
                jobbuf.stage(connection, "tasks", {"task": "jobbuf_e2e.record", "args": plan.record_args(e)})
            entries.append(e)
            Order.objects.create(token=e["token"])
            # A NUL character: refused before any statement, so the atomic block goes on.
            expect_error("a NUL character in an argument is refused before the transaction is touched",
                         lambda: record.delay("nul", "a\x00b"), "NUL character", jobbuf.NulCharacterError) if n == 0 else None
            if rolled_back:
                raise Rollback()
    except Rollback:
        pass
    plan.done(entries, committed=not rolled_back)

check(Order.objects.count() == sum(1 for j in plan.jobs if j["committed"]), "the orders committed with their tasks")

with transaction.atomic():
    for option, value in [("task_id", "x"), ("link", record.s()), ("priority", 5), ("expires", 60), ("headers", {"a": 1})]:
        expect_error(f"apply_async refuses the option {option}, naming it",
                     lambda: record.apply_async(["refused"], **{option: value}), f"option {option!r} cannot be carried",
                     jobbuf.celery.OptionError)
    e = plan.job("after-refusals")
    record.delay(*plan.record_args(e))
plan.done([e], committed=True)

expect_error("a Celery queue without a jobbuf queue names the jobbuf_create_queue call",
             lambda: transaction.atomic()(lambda: record.apply_async(["nope"], queue="nope"))(),
             "jobbuf_create_queue('nope', 'celery', '{\"celery_queue\": \"nope\"}')")

# Outside any atomic block: Celery's own publish (an AsyncResult with a task id).
e = plan.job("outside")
result = record.delay(*plan.record_args(e))
check(not isinstance(result, jobbuf.celery.StagedTask) and bool(result.id), "outside atomic, delay() is Celery's own publish", repr(result))
plan.done([e], committed=True)

plan.write(sys.argv[1])
sys.exit(1 if __import__("plan").failures else 0)
