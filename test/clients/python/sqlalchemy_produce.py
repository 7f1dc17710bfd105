"""SQLAlchemy producer of the Python client's end-to-end test (test/e2e/clients_python.sh):
record.delay / apply_async inside a scoped_session's transactions (jobbuf.celery.use_scoped_session)
that wrote (an INSERT, or an ORM object not yet flushed) and a plain Session bound with
jobbuf.celery.transaction(), every 10th rolled back; a scoped_session that has only read (autobegin)
is not the caller's transaction: delay() stages and commits at once, and removing the session
drops nothing, while one that wrote and is removed unsaved drops its task; jobbuf.stage() on a
SQLAlchemy Connection, a psycopg2 and a psycopg 3 connection, each with rollbacks.
    python sqlalchemy_produce.py EXPECTED.json"""
import os
import sys

import psycopg
import psycopg2
import sqlalchemy
from sqlalchemy.orm import Session, declarative_base, scoped_session, sessionmaker

import jobbuf
import jobbuf.celery
from plan import Plan, Rollback, check, expect_error, record, soon

print(f"# SQLAlchemy {sqlalchemy.__version__}, psycopg2 {psycopg2.__version__.split()[0]}, psycopg {psycopg.__version__}")
dsn = f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} user={os.environ['PGUSER']} dbname={os.environ['PGDATABASE']}"
engine = sqlalchemy.create_engine(
    f"postgresql+psycopg2://{os.environ['PGUSER']}@/{os.environ['PGDATABASE']}?host={os.environ['PGHOST']}&port={os.environ['PGPORT']}",
    future=True)
Base = declarative_base()


class Order(Base):
    __tablename__ = "sa_orders"
    token = sqlalchemy.Column(sqlalchemy.Text, primary_key=True)


Base.metadata.create_all(engine)
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


# A scoped_session: delay() finds its transaction by itself once it has written (n 10-19: an
# ORM object, pending; else an INSERT; rolled back: 6, 26 INSERT, 16 ORM).
def scoped_body(_tx, n):
    session = Scoped()
    session.execute(sqlalchemy.text("SELECT 1"))
    e = plan.job(f"scoped-{n}", not_before=soon(2) if n % 3 == 1 else None, floats=n % 3 == 0)
    if n // 10 == 1:
        session.add(Order(token=e["token"]))
    else:
        session.execute(sqlalchemy.text("INSERT INTO sa_orders (token) VALUES (:t)"), {"t": e["token"]})
    if e["not_before"]:
        record.apply_async(plan.record_args(e), countdown=2)
    else:
        record.delay(*plan.record_args(e))
    return [e]


def scoped_begin():
    return Scoped().begin()


transactions(30, scoped_body, scoped_begin)
Scoped.remove()
check(Scoped().query(Order).count() == 27, "the scoped_session committed 27 orders and rolled back 3")
Scoped.remove()

# Autobegin after reads only: not the caller's work. delay() stages and commits at once; the
# session removed without a commit drops nothing.
session = Scoped()
session.execute(sqlalchemy.text("SELECT count(*) FROM sa_orders"))
e = plan.job("scoped-read-only")
result = record.delay(*plan.record_args(e))
check(session.in_transaction() and isinstance(result, jobbuf.celery.StagedTask),
      "a scoped_session that has only read: delay() stages on its own", repr(result))
Scoped.remove()
plan.done([e], committed=True)

# Autobegin after a write: the caller's transaction; removed without a commit, it drops the task.
for via in ("insert", "orm"):
    session = Scoped()
    e = plan.job(f"scoped-wrote-{via}")
    if via == "orm":
        session.add(Order(token=e["token"]))
    else:
        session.execute(sqlalchemy.text("INSERT INTO sa_orders (token) VALUES (:t)"), {"t": e["token"]})
    record.delay(*plan.record_args(e))
    Scoped.remove()
    plan.done([e], committed=False)
check(Scoped().query(Order).filter(Order.token.like("sqlalchemy-scoped-wrote-%")).count() == 0,
      "the removed sessions' writes were rolled back")
Scoped.remove()

# No session in the registry: staged and committed at once on the scoped_session's engine.
e = plan.job("scoped-none")
result = record.delay(*plan.record_args(e))
check(not Scoped.registry.has() and isinstance(result, jobbuf.celery.StagedTask),
      "no session: delay() stages and commits at once on the registered scoped_session's engine", repr(result))
plan.done([e], committed=True)


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
