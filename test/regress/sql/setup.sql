-- make installcheck runs against a real server, whose jobbuf.redis_url names a real Redis: this
-- database's drain worker must never reach it. Before the extension exists here (so before a
-- worker of this database can connect, whatever jobbuf.database says), point this database's
-- worker at a Redis that cannot exist: the worker keeps the suites' jobs staged, as they expect.
-- teardown.sql drops the database, and with it its worker.
DO $$
BEGIN
  EXECUTE format('ALTER DATABASE %I SET jobbuf.redis_url = %L', current_database(),
                 'unix:///nonexistent/jobbuf-installcheck.sock');
END
$$;
