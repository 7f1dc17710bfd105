"""Celery integration: task.delay(...) / apply_async(...) inside a transaction stage the task with
jobbuf in that transaction; the Celery worker runs it after the commit, never after a rollback.

The one-line change: ``app = Celery("proj", task_cls="jobbuf.celery:Task")`` (or
``app.Task = jobbuf.celery.Task`` before the tasks are defined).

The transaction is, in this order: the connection or session bound with
``with jobbuf.celery.transaction(conn_or_session):``; Django's connection inside
``transaction.atomic()``; a SQLAlchemy scoped_session registered with
``jobbuf.celery.use_scoped_session(Session)`` that is in a transaction. Outside any, apply_async
is Celery's own: there is no transaction for the task to follow, and code outside one (beat,
scripts, canvas primitives run by the worker) keeps publishing as it does today.

Carried: args, kwargs, eta, countdown, queue (and task routes; the jobbuf queue is the one
delivering into that Celery queue: SQL jobbuf_queue_for). Every other option is refused with an
error naming it (jobbuf derives the task id; links, priorities, expiry, headers and time limits
are not in the message jobbuf writes).
"""
import contextlib
import contextvars
import sys

import celery
from celery.utils.time import maybe_make_aware

from . import _json
from ._connection import runner_for

STAGE_SQL = ("SELECT jobbuf_stage(jobbuf_queue_for('celery', CAST(%s AS text)), CAST(%s AS jsonb), "
             "COALESCE(CAST(%s AS timestamptz), pg_catalog.clock_timestamp() + CAST(%s AS float8) * interval '1 second'))")

CARRIED = ("eta", "countdown", "queue")
REASONS = {
    "task_id": "jobbuf derives the Celery task id from the jobbuf job id",
    "link": "callbacks are not part of the message jobbuf writes; call the next task from this one",
    "link_error": "errbacks are not part of the message jobbuf writes",
    "priority": "jobbuf delivers tasks to the Redis list of their queue in commit order",
    "expires": "the message jobbuf writes carries no expiry",
}

DJANGO_DATABASE = "default"

_bound = contextvars.ContextVar("jobbuf_celery_transaction", default=None)
_scoped_sessions = []


class OptionError(TypeError):
    """An apply_async option jobbuf cannot carry."""


@contextlib.contextmanager
def transaction(conn):
    """Within the block, tasks stage through conn (any connection or session stage() accepts)."""
    token = _bound.set(conn)
    try:
        yield conn
    finally:
        _bound.reset(token)


def use_scoped_session(scoped_session):
    """Tasks applied while this SQLAlchemy scoped_session is in a transaction stage through it."""
    if scoped_session not in _scoped_sessions:
        _scoped_sessions.append(scoped_session)


def current_transaction():
    """The connection or session a task applied now stages through, or None."""
    bound = _bound.get()
    if bound is not None:
        return bound
    if "django.db" in sys.modules:
        from django.conf import settings
        if settings.configured:
            from django.db import transaction as django_transaction
            connection = django_transaction.get_connection(DJANGO_DATABASE)
            if connection.in_atomic_block:
                return connection
    for scoped in _scoped_sessions:
        if scoped.registry.has():
            session = scoped()
            if session.in_transaction():
                return session
    return None


class StagedTask:
    """What apply_async returns for a staged task: the task id is given when jobbuf delivers it."""

    id = None

    def __init__(self, jobbuf_id, task_name, queue):
        self.jobbuf_id = jobbuf_id
        self.task_name = task_name
        self.queue = queue

    def __repr__(self):
        return f"<StagedTask {self.task_name} jobbuf_id={self.jobbuf_id} queue={self.queue}>"


class Task(celery.Task):
    """A Celery Task whose delay / apply_async stage through the caller's transaction."""

    def apply_async(self, args=None, kwargs=None, task_id=None, producer=None, link=None,
                    link_error=None, shadow=None, **options):
        conn = current_transaction()
        # Celery's own retry (Task.retry) republishes the running task: not the caller's job.
        if conn is None or "retries" in options:
            return super().apply_async(args, kwargs, task_id, producer, link, link_error, shadow, **options)
        given = dict(options, task_id=task_id, producer=producer, link=link, link_error=link_error, shadow=shadow)
        for name, value in given.items():
            if value is None or name in CARRIED or (name == "serializer" and value == "json"):
                continue
            raise OptionError(f"jobbuf: the apply_async option {name!r} cannot be carried: "
                              + REASONS.get(name, "jobbuf carries args, kwargs, eta, countdown and queue"))
        queue = self._jobbuf_celery_queue(options, args, kwargs)
        payload = {"task": self.name, "args": list(args or ()), "kwargs": dict(kwargs or {})}
        eta = options.get("eta")
        if eta is not None:
            eta = maybe_make_aware(eta, self.app.timezone).isoformat()
        countdown = options.get("countdown")
        rows = runner_for(conn)(STAGE_SQL, [queue, _json.dumps(payload), eta,
                                            None if countdown is None else float(countdown)])
        return StagedTask(rows[0][0], self.name, queue)

    def _jobbuf_celery_queue(self, options, args, kwargs):
        queue = options.get("queue") or getattr(self, "queue", None)
        if queue is None:
            route = self.app.amqp.router.route({}, self.name, args, kwargs)
            queue = route.get("queue")
        return getattr(queue, "name", queue) or self.app.conf.task_default_queue
