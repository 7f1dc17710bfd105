"""Django producer of the Python client's end-to-end test (test/e2e/clients_python.sh):
record.delay / apply_async(args, kwargs, eta=, countdown=, queue=) inside transaction.atomic(),
every 10th atomic block rolled back, with an Order created next to each task; jobbuf.stage() on
Django's connection; the refusals; a second database with jobbuf ('orders'): delay() inside
atomic(using="orders") follows that block, atomic blocks on two databases with jobbuf raise unless
jobbuf.celery.transaction() binds one, one on a database without jobbuf ('plain') does not count;
outside any atomic block, delay() stages and commits at once, and options jobbuf cannot carry are
Celery's own publish.
    python django_produce.py EXPECTED.json"""
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "django_project"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
import django  # noqa: E402

django.setup()
from django.db import connection, connections, transaction  # noqa: E402

import jobbuf  # noqa: E402
import jobbuf.celery  # noqa: E402
from plan import Plan, Rollback, check, expect_error, record, soon  # noqa: E402
from shop.models import Order  # noqa: E402

print(f"# Django {django.get_version()}, Celery {__import__('celery').__version__}")
for alias in ("default", "orders"):
    with connections[alias].schema_editor() as editor:
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

# A second database with jobbuf: atomic(using="orders") is the transaction of the caller's work.
for n, rolled_back in [(0, True), (1, False)]:
    e = plan.job(f"orders-{n}")
    try:
        with transaction.atomic(using="orders"):
            Order.objects.using("orders").create(token=e["token"])
            result = record.delay(*plan.record_args(e))
            check(isinstance(result, jobbuf.celery.StagedTask),
                  f"inside atomic(using='orders'), delay() stages in that block ({'rolled back' if rolled_back else 'committed'})",
                  repr(result))
            if rolled_back:
                raise Rollback()
    except Rollback:
        pass
    plan.done([e], committed=not rolled_back)
check(list(Order.objects.using("orders").values_list("token", flat=True)) == ["django-orders-1"],
      "the orders database kept the committed order only")

with transaction.atomic(), transaction.atomic(using="orders"):
    try:
        record.delay("ambiguous")
    except jobbuf.celery.TransactionChoiceError as error:
        check("'default'" in str(error) and "'orders'" in str(error)
              and "jobbuf.celery.transaction(connections['orders'])" in str(error),
              "atomic blocks on two databases with jobbuf: delay() raises, naming both and how to choose", str(error))
    else:
        check(False, "atomic blocks on two databases with jobbuf: delay() raises, naming both and how to choose", "no error")
    # Bound, the task follows the orders block, which rolls back while default's commits.
    e = plan.job("orders-bound")
    try:
        with transaction.atomic(using="orders"), jobbuf.celery.transaction(connections["orders"]):
            record.delay(*plan.record_args(e))
            raise Rollback()
    except Rollback:
        pass
    plan.done([e], committed=False)

# An atomic block on a database without jobbuf is not a transaction a task can follow.
e = plan.job("plain")
with transaction.atomic(), transaction.atomic(using="plain"):
    result = record.delay(*plan.record_args(e))
    check(isinstance(result, jobbuf.celery.StagedTask), "atomic on 'default' and on 'plain' (no jobbuf): delay() stages in default's", repr(result))
plan.done([e], committed=True)

# Outside any atomic block: staged in autocommit on 'default', committed before delay() returns.
e = plan.job("outside")
result = record.delay(*plan.record_args(e))
check(isinstance(result, jobbuf.celery.StagedTask),
      "outside atomic, delay() stages and commits at once", repr(result))
plan.done([e], committed=True)

# Outside any atomic block, options jobbuf cannot carry (the worker's chains pass task_id,
# parent_id, ...) are Celery's own publish, as without jobbuf.
e = plan.job("outside-own")
result = record.apply_async(plan.record_args(e), task_id="django-outside-own-id")
check(not isinstance(result, jobbuf.celery.StagedTask) and result.id == "django-outside-own-id",
      "outside atomic, apply_async(task_id=...) is Celery's own publish", repr(result))
plan.done([e], committed=True)

plan.write(sys.argv[1])
sys.exit(1 if __import__("plan").failures else 0)
