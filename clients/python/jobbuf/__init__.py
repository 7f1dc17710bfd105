"""jobbuf for Python: stage jobs with the jobbuf PostgreSQL extension inside the caller's
transaction (stage), and Celery tasks through it (jobbuf.celery)."""
import datetime

from ._connection import ConnectionTypeError, runner_for
from ._json import NulCharacterError, dumps

__all__ = ["stage", "NulCharacterError", "ConnectionTypeError"]
__version__ = "1.2.0"

STAGE_SQL = ("SELECT jobbuf_stage(CAST(%s AS text), CAST(%s AS jsonb), CAST(%s AS timestamptz), CAST(%s AS text), CAST(%s AS text))")


def _run_at_text(run_at):
    if run_at is None:
        return None
    if isinstance(run_at, datetime.datetime):
        if run_at.tzinfo is None:
            raise ValueError("jobbuf: run_at must be timezone-aware (a naive datetime names no instant)")
        return run_at.isoformat()
    if isinstance(run_at, str):
        return run_at  # PostgreSQL parses it, or refuses it
    raise TypeError(f"jobbuf: run_at must be an aware datetime or a timestamptz string, not {type(run_at).__name__}")


def _optional_text(name, value):
    if value is not None and not isinstance(value, str):
        raise TypeError(f"jobbuf: {name} must be a str, not {type(value).__name__}")
    return value


def stage(conn, queue, payload, run_at=None, unique_key=None, partition_key=None):
    """Stages one job in conn's transaction; returns its jobbuf id (an int), or None when a job
    with the same unique_key is still staged (jobbuf stages nothing then)."""
    if not isinstance(queue, str):
        raise TypeError("jobbuf: the queue name must be a str")
    params = [queue, dumps(payload), _run_at_text(run_at),
              _optional_text("unique_key", unique_key), _optional_text("partition_key", partition_key)]
    rows = runner_for(conn)(STAGE_SQL, params)
    return rows[0][0]
