-- jobbuf: the framework queue lookup the clients (clients/node, clients/python, clients/ruby) call
-- to turn a job framework's queue name into the jobbuf queue that delivers into it. It comes after
-- 90_privileges.sql because it grants to the roles that file creates.

-- jobbuf_queue_for(target, framework_queue): the jobbuf queue whose target is `target` and whose
-- framework queue equals `framework_queue`: the sidekiq_queue / bullmq_queue option (default the
-- jobbuf queue's name) or the celery_queue option (default "celery", where the worker delivers a
-- celery queue without that option). When several jobbuf queues deliver into it, the one named
-- like the framework queue wins; otherwise that is an error, as is no queue at all (naming the
-- jobbuf_create_queue call to make). Invoker's rights: it reads jobbuf.queues, which producers may.
CREATE FUNCTION jobbuf_queue_for(target text, framework_queue text)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    option_name text;
    found text[];
    create_call text;
BEGIN
    option_name := CASE target WHEN 'sidekiq' THEN 'sidekiq_queue' WHEN 'bullmq' THEN 'bullmq_queue'
                               WHEN 'celery' THEN 'celery_queue' END;
    IF option_name IS NULL THEN
        RAISE EXCEPTION 'jobbuf: jobbuf_queue_for knows the targets sidekiq, bullmq and celery, not %',
            coalesce(pg_catalog.quote_literal(target), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF framework_queue IS NULL OR framework_queue OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'jobbuf: a % queue name must not be empty', target
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT pg_catalog.array_agg(q.name ORDER BY q.name) INTO found
      FROM jobbuf.queues q
     WHERE q.target OPERATOR(pg_catalog.=) target
       AND COALESCE(q.options OPERATOR(pg_catalog.->>) option_name,
                               CASE WHEN target OPERATOR(pg_catalog.=) 'celery' THEN 'celery' ELSE q.name END)
           OPERATOR(pg_catalog.=) framework_queue;
    IF found IS NULL THEN
        create_call := pg_catalog.format('SELECT jobbuf_create_queue(%L, %L%s);', framework_queue, target,
            CASE WHEN target OPERATOR(pg_catalog.=) 'celery' AND framework_queue OPERATOR(pg_catalog.<>) 'celery'
                 THEN pg_catalog.format(', %L', pg_catalog.jsonb_build_object('celery_queue', framework_queue)::text)
                 ELSE '' END);
        RAISE EXCEPTION 'jobbuf: no jobbuf queue delivers into the % queue "%": create one (in a migration) with %',
            target, framework_queue, create_call
            USING ERRCODE = 'undefined_object',
                  HINT = pg_catalog.format('a %s queue delivers into the %s queue named by its %s option (default %s)',
                      target, target, option_name,
                      CASE WHEN target OPERATOR(pg_catalog.=) 'celery' THEN '"celery"' ELSE 'the jobbuf queue''s name' END);
    END IF;
    IF pg_catalog.cardinality(found) OPERATOR(pg_catalog.=) 1 THEN
        RETURN found[1];
    END IF;
    IF framework_queue OPERATOR(pg_catalog.=) ANY (found) THEN
        RETURN framework_queue;
    END IF;
    RAISE EXCEPTION 'jobbuf: % jobbuf queues deliver into the % queue "%": %', pg_catalog.cardinality(found),
        target, framework_queue, pg_catalog.array_to_string(found, ', ')
        USING ERRCODE = 'ambiguous_parameter',
              HINT = 'stage with jobbuf_stage and the jobbuf queue''s name, or rename one jobbuf queue like the framework queue';
END $$;

REVOKE ALL ON FUNCTION jobbuf_queue_for(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_queue_for(text, text) TO jobbuf_producer, jobbuf_admin;
