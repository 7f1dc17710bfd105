"""Runs one statement on the connection of the caller's transaction, whatever holds it.

Accepted: a psycopg2 connection or cursor, a psycopg 3 connection or cursor, a SQLAlchemy
Connection or Session (the statement joins the transaction they have begun), Django's connection
(django.db.connection or connections[alias]). SQL is written with %s placeholders, cast with
CAST(%s AS type) (SQLAlchemy would read ":name::type" as a bind name); values always travel as
parameters. The transaction objects of SQLAlchemy's begin() stand for their session or connection. A SQLAlchemy Engine is refused: it runs each statement on any of its
connections, outside the caller's transaction.
"""


class ConnectionTypeError(TypeError):
    """stage() got something that is not the connection of a transaction."""


def _module(obj):
    return type(obj).__module__ or ""


def _dbapi(cursor_factory):
    def run(sql, params):
        cur = cursor_factory()
        try:
            cur.execute(sql, params)
            return cur.fetchall()
        finally:
            cur.close()
    return run


def _dbapi_cursor(cur):
    def run(sql, params):
        cur.execute(sql, params)
        return cur.fetchall()
    return run


def _sqlalchemy(executor):
    from sqlalchemy import text

    def run(sql, params):
        names = {f"p{i}": value for i, value in enumerate(params)}
        parts = sql.split("%s")
        statement = parts[0] + "".join(f":p{i}" + part for i, part in enumerate(parts[1:]))
        return [tuple(row) for row in executor.execute(text(statement), names).fetchall()]
    return run


def runner_for(conn):
    """A function (sql, params) -> rows running on conn's transaction."""
    module = _module(conn)
    if module.startswith("sqlalchemy."):
        name = type(conn).__name__
        if name in ("Engine", "OptionEngine"):
            raise ConnectionTypeError(
                "jobbuf: stage() got a SQLAlchemy Engine, which runs each statement on any of its "
                "connections, outside your transaction: pass the Connection of engine.begin() or "
                "your Session")
        if name == "SessionTransaction":
            return _sqlalchemy(conn.session)
        if hasattr(conn, "execute"):
            return _sqlalchemy(conn)
        if hasattr(conn, "connection") and hasattr(conn.connection, "execute"):  # Connection.begin()
            return _sqlalchemy(conn.connection)
    if module.startswith("django."):
        # ConnectionProxy (django.db.connection) or a DatabaseWrapper: its cursor joins the
        # connection's atomic block, if any.
        return _dbapi(conn.cursor)
    if module.startswith(("psycopg2", "psycopg")):
        if hasattr(conn, "fetchall"):
            return _dbapi_cursor(conn)
        if hasattr(conn, "cursor"):
            return _dbapi(conn.cursor)
    raise ConnectionTypeError(
        "jobbuf: stage() takes a psycopg2 or psycopg 3 connection or cursor, a SQLAlchemy "
        f"Connection or Session, or Django's connection; got {type(conn).__module__}.{type(conn).__name__}")
