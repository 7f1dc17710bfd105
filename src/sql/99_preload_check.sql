
-- Keep this part last. CREATE EXTENSION works without the library in shared_preload_libraries
-- (the first call loads it), but then no drain worker runs and staged jobs pile up silently:
-- say so once, here. SHOW shared_preload_libraries gives the list the server started with.
DO $$
BEGIN
    IF NOT pg_catalog.current_setting('shared_preload_libraries') OPERATOR(pg_catalog.~)
            '(^|[\s,"''/])jobbuf(\.so)?(["'']|\s|,|$)' THEN
        RAISE WARNING 'jobbuf: the jobbuf library is not in shared_preload_libraries: no drain worker runs, and staged jobs wait in jobbuf.jobs'
            USING HINT = 'add jobbuf to shared_preload_libraries in postgresql.conf (shared_preload_libraries = ''jobbuf'') and restart PostgreSQL; jobbuf_worker_status() shows the workers';
    END IF;
END $$;
