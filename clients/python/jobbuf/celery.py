"""Celery integration: task.delay(...) / apply_async(...) stage the task with jobbuf in exactly the
transaction that will commit the caller's work; the Celery worker runs it after that commit, never
after a rollback.

The one-line change: ``app = Celery("proj", task_cls="jobbuf.celery:Task")`` (or
``app.Task = jobbuf.celery.Task`` before the tasks are defined).

Where a task goes, in this order:

1. ``with jobbuf.celery.transaction(conn_or_session):`` binds a transaction: the task stages in it.
2. Otherwise the transactions that carry the caller's work: each Django alias (every one in
   ``django.db.connections``, not only 'default') whose database is PostgreSQL with the jobbuf
   extension and that is inside ``transaction.atomic()``, and each SQLAlchemy scoped_session
   registered with ``use_scoped_session(Session)`` whose transaction has written (pending ORM
   changes, or a transaction id assigned in PostgreSQL). One: the task stages in it. Two or more:
   TransactionChoiceError, naming them; bind one with ``transaction()``.
3. None: the task stages in a transaction of its own that commits before apply_async returns, as
   Celery's own publish would send it at once: in autocommit on a Django alias whose database has
   jobbuf ('default' first), else on the engine of a registered scoped_session (a session whose
   transaction has only read is not the caller's work: removing it unsaved drops nothing).
   Options jobbuf cannot carry are then Celery's own publish (the worker's chains and chords).
4. No database with jobbuf known: Celery's own publish, as without jobbuf.

Carried: args, kwargs, eta, countdown, queue (and task routes; the jobbuf queue is the one
delivering into that Celery queue: SQL jobbuf_queue_for). In a transaction, every other option is
refused with an error naming it (jobbuf derives the task id; links, priorities, expiry, headers
and time limits are not in the message jobbuf writes). Celery's retries (Task.retry) are Celery's
own publish.
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

DJANGO_DATABASE = "default"   # the alias staged on first outside any transaction

HAS_JOBBUF_SQL = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'jobbuf')"
WROTE_SQL = "SELECT pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL"

_bound = contextvars.ContextVar("jobbuf_celery_transaction", default=None)
_scoped_sessions = []
_django_has_jobbuf_cache = {}


class OptionError(TypeError):
    """An apply_async option jobbuf cannot carry."""


class TransactionChoiceError(RuntimeError):
    """More than one transaction could be the caller's: bind one with jobbuf.celery.transaction()."""


@contextlib.contextmanager
def transaction(conn):
    """Within the block, tasks stage through conn (any connection or session stage() accepts)."""
    token = _bound.set(conn)
    try:
        yield conn
    finally:
        _bound.reset(token)


def use_scoped_session(scoped_session):
    """Tasks applied while this SQLAlchemy scoped_session's transaction has written stage through
    it; outside one, they stage and commit at once on its engine."""
    if scoped_session not in _scoped_sessions:
        _scoped_sessions.append(scoped_session)


def _django_connections():
    if "django.db" not in sys.modules:
        return None
    from django.conf import settings
    if not settings.configured:
        return None
    from django.db import connections
    return connections


def _django_has_jobbuf(connections, alias):
    """Whether alias's database is PostgreSQL with the jobbuf extension (asked once per database)."""
    conn = connections[alias]
    if conn.vendor != "postgresql":
        return False
    s = conn.settings_dict
    key = (alias, s.get("NAME"), s.get("HOST"), s.get("PORT"))
    if key not in _django_has_jobbuf_cache:
        _django_has_jobbuf_cache[key] = bool(runner_for(conn)(HAS_JOBBUF_SQL, None)[0][0])
    return _django_has_jobbuf_cache[key]


def _sqlalchemy_bind(session, scoped):
    """(is PostgreSQL, its Engine or None) for the session's bind, or the factory's without one."""
    bind = session.get_bind() if session is not None else scoped.session_factory.kw.get("bind")
    if bind is None or bind.dialect.name != "postgresql":
        return False, None
    return True, bind if type(bind).__name__ in ("Engine", "OptionEngine") else None


def _has_written(session):
    if session.new or session.dirty or session.deleted:
        return True
    return bool(runner_for(session)(WROTE_SQL, [])[0][0])


def _own_transaction(run_on):
    """A runner staging in a transaction of its own, committed before it returns."""
    def run(sql, params):
        with run_on() as conn:
            return runner_for(conn)(sql, params)
    return run


def _choose():
    """("in", conn): stage in conn's transaction; ("own", run): stage with run, which commits at
    once; None: Celery's own publish."""
    bound = _bound.get()
    if bound is not None:
        return "in", bound
    found = []   # (what, how to bind it, conn)
    engines = []
    connections = _django_connections()
    if connections is not None:
        for alias in connections:
            conn = connections[alias]
            if conn.in_atomic_block and _django_has_jobbuf(connections, alias):
                found.append((f"Django's atomic block on {alias!r}", f"connections[{alias!r}]", conn))
    for scoped in _scoped_sessions:
        session = scoped() if scoped.registry.has() else None
        postgresql, engine = _sqlalchemy_bind(session, scoped)
        if not postgresql:
            continue
        # A session bound to a Connection has no transaction of its own to offer: it is the caller's.
        if session is not None and session.in_transaction() and (engine is None or _has_written(session)):
            found.append(("a SQLAlchemy scoped_session's transaction", "session", session))
        elif engine is not None:
            engines.append(engine)
    if len(found) > 1:
        raise TransactionChoiceError(
            "jobbuf: the task could stage in " + " or ".join(what for what, _, _ in found)
            + ", and jobbuf cannot tell which will commit your work: bind the one that will, "
            + f"e.g. with jobbuf.celery.transaction({found[-1][1]}): around the call")
    if found:
        return "in", found[0][2]
    if connections is not None:
        from django.db import Error as DjangoDatabaseError
        aliases = sorted(connections, key=lambda alias: alias != DJANGO_DATABASE)
        for alias in aliases:
            try:
                usable = _django_has_jobbuf(connections, alias)
            except DjangoDatabaseError:   # an alias that cannot be reached stages nothing
                usable = False
            if usable:
                # Not in an atomic block: Django's autocommit commits the statement at once.
                return "own", runner_for(connections[alias])
    if engines:
        return "own", _own_transaction(engines[0].begin)
    return None


def current_transaction():
    """The connection or session of the transaction a task applied now stages in, or None (it
    would stage in one of its own, or be Celery's own publish)."""
    choice = _choose()
    return choice[1] if choice is not None and choice[0] == "in" else None


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
        # Celery's own retry (Task.retry) republishes the running task: not the caller's job.
        choice = None if "retries" in options else _choose()
        if choice is None:
            return super().apply_async(args, kwargs, task_id, producer, link, link_error, shadow, **options)
        where, target = choice
        given = dict(options, task_id=task_id, producer=producer, link=link, link_error=link_error, shadow=shadow)
        for name, value in given.items():
            if value is None or name in CARRIED or (name == "serializer" and value == "json"):
                continue
            if where == "own":
                # No transaction to follow: Celery's own publish carries what jobbuf cannot.
                return super().apply_async(args, kwargs, task_id, producer, link, link_error, shadow, **options)
            raise OptionError(f"jobbuf: the apply_async option {name!r} cannot be carried: "
                              + REASONS.get(name, "jobbuf carries args, kwargs, eta, countdown and queue"))
        queue = self._jobbuf_celery_queue(options, args, kwargs)
        payload = {"task": self.name, "args": list(args or ()), "kwargs": dict(kwargs or {})}
        eta = options.get("eta")
        if eta is not None:
            eta = maybe_make_aware(eta, self.app.timezone).isoformat()
        countdown = options.get("countdown")
        run = runner_for(target) if where == "in" else target
        rows = run(STAGE_SQL, [queue, _json.dumps(payload), eta,
                                None if countdown is None else float(countdown)])
        return StagedTask(rows[0][0], self.name, queue)

    def _jobbuf_celery_queue(self, options, args, kwargs):
        queue = options.get("queue") or getattr(self, "queue", None)
        if queue is None:
            route = self.app.amqp.router.route({}, self.name, args, kwargs)
            queue = route.get("queue")
        return getattr(queue, "name", queue) or self.app.conf.task_default_queue
