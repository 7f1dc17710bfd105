"""SQLAlchemy producer of the Python client's end-to-end test (test/e2e/clients_python.sh):
record.delay / apply_async inside a scoped_session's transactions (jobbuf.celery.use_scoped_session)
and a plain Session bound with jobbuf.celery.transaction(), every 10th rolled back; jobbuf.stage()
on a SQLAlchemy Connection, a psycopg2 and a psycopg 3 connection, each with rollbacks.
    python sqlalchemy_produce.py EXPECTED.json"""
import os
import sys

import psycopg
import psycopg2
import sqlalchemy
from sqlalchemy.orm import Session, scoped_session, sessionmaker

import jobbuf
import jobbuf.celery
from plan import Plan, Rollback, check, expect_error, record, soon

print(f"# SQLAlchemy {sqlalchemy.__version__}, psycopg2 {psycopg2.__version__.split()[0]}, psycopg {psycopg.__version__}")
dsn = f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={os.environ['PGUSER']} dbname={os.environ['PGDATABASE']}"
engine = sqlalchemy.create_engine(
    f"postgresql+psycopg2://{os.environ['PGUSER']}@/{os.environ['PGDATABASE']}?host={os.environ['PGHOST']}&port={os.environ['PGPORT']}",
    future=True)
Scoped = scoped_session(sessionmaker(bind=engine, future=True))
jobbuf.celery.use_scoped_session(Scoped)
plan = Plan("sqlalchemy")


def transactions(count, body, begin):
    """count transactions of body(tx, n) through begin(), every 10th rolled back."""
    for n in range(count):
        rolled_back = n % 10 == 6
        entries = []
        try:
            with begin() as tx:
                entries.extend(body(tx, n))
                if rolled_back:
                    raise Rollback()
        except Rollback:
            pass
        plan.done(entries, committed=not rolled_back)


# A scoped_session: delay() finds its transaction by itself.
def scoped_body(_tx, n):
    session = Scoped()
    session.execute(sqlalchemy.text("SELECT 1"))
    e = plan.job(f"scoped-{n}", not_before=soon(2) if n % 3 == 1 else None, floats=n % 3 == 0)
    if e["not_before"]:
        record.apply_async(plan.record_args(e), countdown=2)
    else:
        record.delay(*plan.record_args(e))
    return [e]


def scoped_begin():
    return Scoped().begin()


transactions(30, scoped_body, scoped_begin)
Scoped.remove()


# A plain Session, bound for the block.
def bound_body(session, n):
    e = plan.job(f"bound-{n}", queue="critical" if n % 2 else "celery")
    with jobbuf.celery.transaction(session):
        record.apply_async(plan.record_args(e), queue=e["queue"])
    return [e]


transactions(10, bound_body, lambda: Session(engine, future=True).begin())


# stage() on a SQLAlchemy Connection, psycopg2 and psycopg 3 connections.
def stage_body(via):
    def body(conn, n):
        e = plan.job(f"{via}-{n}")
        jobbuf.stage(conn, "tasks", {"task": "jobbuf_e2e.record", "args": plan.record_args(e)})
        return [e]
    return body


transactions(10, stage_body("connection"), engine.begin)


class Psycopg2Tx:
    def __enter__(self):
        self.conn = psycopg2.connect(dsn)
        return self.conn

    def __exit__(self, kind, *_):
        (self.conn.rollback if kind else self.conn.commit)()
        self.conn.close()


transactions(10, stage_body("psycopg2"), Psycopg2Tx)


def psycopg3_begin():
    conn = psycopg.connect(dsn)

    class Tx:
        def __enter__(self):
            return conn

        def __exit__(self, kind, *_):
            (conn.rollback if kind else conn.commit)()
            conn.close()
    return Tx()


transactions(10, stage_body("psycopg3"), psycopg3_begin)

expect_error("stage() refuses a SQLAlchemy Engine (it would stage outside the transaction)",
             lambda: jobbuf.stage(engine, "tasks", {"task": "x"}), "Engine", jobbuf.ConnectionTypeError)
with psycopg2.connect(dsn) as conn:
    first = jobbuf.stage(conn, "tasks", {"task": "jobbuf_e2e.record", "args": plan.record_args({"token": "sqlalchemy-unique", "floats": False})}, unique_key="u")
    second = jobbuf.stage(conn, "tasks", {"task": "jobbuf_e2e.record", "args": plan.record_args({"token": "sqlalchemy-unique-2", "floats": False})}, unique_key="u")
    check(isinstance(first, int) and second is None, "stage() returns the id, then None for a unique_key still staged", f"{first} {second}")
plan.done([{"token": "sqlalchemy-unique", "queue": "celery", "not_before": None, "floats": False}], committed=True)
plan.done([{"token": "sqlalchemy-unique-2", "queue": "celery", "not_before": None, "floats": False}], committed=False)

plan.write(sys.argv[1])
sys.exit(1 if __import__("plan").failures else 0)
