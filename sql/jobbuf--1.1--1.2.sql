-- jobbuf 1.1 -> 1.2: ALTER EXTENSION jobbuf UPDATE. Every change 1.2 makes to the extension's SQL
-- is made here as well as in src/sql/ (which builds jobbuf--1.2.sql). test/upgrade checks
-- that an updated 1.1 (and 1.0) and a fresh 1.2 have the same catalog, with jobs in every state.
\echo Use "ALTER EXTENSION jobbuf UPDATE TO '1.2'" to load this file. \quit

-- First, the library: 1.2's SQL needs the 1.2 library, and a server still running the 1.1 one
-- (the new build installed, Postgres not yet restarted) would run 1.1's worker against 1.2's
-- objects. jobbuf.library_version() answers from the library loaded in this backend.
DO $$
BEGIN
    IF jobbuf.library_version() OPERATOR(pg_catalog.=) '1.1' THEN
        RAISE EXCEPTION 'jobbuf: the jobbuf library loaded in this server is older than 1.2'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'install the new build, restart PostgreSQL (the library is loaded at server start), then run ALTER EXTENSION jobbuf UPDATE';
    END IF;
END $$;
-- (part of jobbuf--1.1--1.2.sql)
-- jobbuf: Redis Cluster placement. When the drain worker of this database delivers to a Redis
-- Cluster (jobbuf.redis_url redis+cluster:// or rediss+cluster://), a queue is refused at
-- jobbuf_create_queue / jobbuf_alter_queue unless the cluster can take its units: sidekiq and
-- celery never (their consumers cannot read a cluster), bullmq only when its keys share one slot
-- (a {hash tag} in prefix or bullmq_queue). See docs/cluster.md.

-- Raises a clear error when the row's queue cannot live on the Redis Cluster this database's
-- worker uses: the database's own jobbuf.redis_url (ALTER DATABASE ... SET), else the server's
-- (postgresql.conf, ALTER SYSTEM), else the default.
CREATE FUNCTION jobbuf.cluster_placement_check()
RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    url text;
    base text;
BEGIN
    SELECT pg_catalog.substr(s.setting, 18) INTO url
      FROM pg_catalog.pg_db_role_setting d
      JOIN pg_catalog.pg_database db ON db.oid OPERATOR(pg_catalog.=) d.setdatabase,
           pg_catalog.unnest(d.setconfig) AS s(setting)
     WHERE db.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
       AND d.setrole OPERATOR(pg_catalog.=) 0::pg_catalog.oid
       AND pg_catalog.starts_with(s.setting, 'jobbuf.redis_url=');
    IF url IS NULL THEN
        SELECT f.setting INTO url FROM pg_catalog.pg_file_settings f
         WHERE f.name OPERATOR(pg_catalog.=) 'jobbuf.redis_url' AND f.error IS NULL
         ORDER BY f.seqno DESC LIMIT 1;
    END IF;
    url := pg_catalog.lower(coalesce(url, ''));
    IF NOT (pg_catalog.starts_with(url, 'redis+cluster://') OR pg_catalog.starts_with(url, 'rediss+cluster://')) THEN
        RETURN NEW;
    END IF;
    IF NEW.target OPERATOR(pg_catalog.=) ANY (ARRAY['sidekiq', 'celery']) THEN
        RAISE EXCEPTION 'jobbuf: queue %: the % target cannot be delivered to a Redis Cluster',
                        pg_catalog.quote_literal(NEW.name), NEW.target
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = CASE NEW.target WHEN 'sidekiq' THEN 'Sidekiq does not support Redis Cluster.'
                                           ELSE 'Celery''s Redis transport (kombu) has no Redis Cluster support.' END,
                  HINT = 'this database''s jobbuf.redis_url is a Redis Cluster: use the list, stream or bullmq target, or a single Redis (or Sentinel) for this database';
    END IF;
    IF NEW.target OPERATOR(pg_catalog.=) 'bullmq' THEN
        base := coalesce(NEW.options OPERATOR(pg_catalog.->>) 'prefix', 'bull') OPERATOR(pg_catalog.||) ':'
                OPERATOR(pg_catalog.||) coalesce(NEW.options OPERATOR(pg_catalog.->>) 'bullmq_queue', NEW.name);
        IF NOT base OPERATOR(pg_catalog.~) '^[^{]*\{[^}]+\}' THEN
            RAISE EXCEPTION 'jobbuf: queue %: a bullmq queue on a Redis Cluster needs a {hash tag} in its prefix or bullmq_queue option',
                            pg_catalog.quote_literal(NEW.name)
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'BullMQ''s keys of one queue are used together in one script: they must share one slot.',
                      HINT = 'for example options {"prefix": "{bull}"} (then give BullMQ''s Queue and Worker the same prefix)';
        END IF;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER queues_cluster_placement BEFORE INSERT OR UPDATE OF target, options ON jobbuf.queues
    FOR EACH ROW EXECUTE FUNCTION jobbuf.cluster_placement_check();

-- As 90_privileges.sql does for every function of the extension.
REVOKE ALL ON FUNCTION jobbuf.cluster_placement_check() FROM PUBLIC;

-- jobbuf_cluster_nodes() (as src/sql/95_cluster_nodes.sql).
CREATE FUNCTION jobbuf_cluster_nodes(
    OUT node text, OUT node_id text, OUT role text, OUT health text,
    OUT slot_first integer, OUT slot_last integer)
RETURNS SETOF record LANGUAGE c VOLATILE ROWS 12 AS 'MODULE_PATHNAME', 'jobbuf_cluster_nodes';
REVOKE ALL ON FUNCTION jobbuf_cluster_nodes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_cluster_nodes() TO jobbuf_admin;

-- Copies of a database (issue: a restored or copied database delivered its jobs again): the
-- installation's identity, recorded by every job; held jobs; the claim paths and statistics that
-- skip them. (src/sql/00_schema.sql, 30_inspection.sql, 40_claim_slots.sql to 42_claim_settle.sql, 60_copies.sql,
-- 90_privileges.sql)
-- The installation's identity: made by CREATE EXTENSION, one row, never dumped (not a
-- configuration table), so a database restored from a dump gets an identity of its own. Jobs
-- record the identity they were staged under (jobbuf.jobs.origin: the ids consumers see derive
-- from it) and the identity allowed to deliver or claim them (owner). A job whose owner is not
-- the installation's own identity is held: restored from a dump, copied by CREATE DATABASE ...
-- TEMPLATE, or applied by logical replication; the worker and claims skip it until
-- jobbuf_release_restored adopts it. A database copied by CREATE DATABASE ... TEMPLATE carries
-- this row too: jobbuf.installation_id() tells by database_oid and answers with an identity
-- derived from this one and the copy's own oid, so the copy's jobs are held there as well.
CREATE TABLE jobbuf.installation (
    id           uuid NOT NULL,
    database_oid oid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    one_row      boolean PRIMARY KEY DEFAULT true CONSTRAINT installation_one_row CHECK (one_row)
);
COMMENT ON TABLE jobbuf.installation IS 'this installation''s identity (one row, not dumped): jobs staged here record it; change it only with jobbuf_reset_identity()';
INSERT INTO jobbuf.installation (id, database_oid)
SELECT pg_catalog.gen_random_uuid(), d.oid FROM pg_catalog.pg_database d
WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();

-- The identity jobs staged now record (cached per backend; see src/installation_identity.cpp),
-- and the trigger that makes every backend read it again after a change.
CREATE FUNCTION jobbuf.installation_id()
RETURNS uuid LANGUAGE c STABLE PARALLEL SAFE AS 'MODULE_PATHNAME', 'jobbuf_installation_id';
CREATE FUNCTION jobbuf.installation_changed_trigger() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', 'jobbuf_installation_changed_trigger';
CREATE TRIGGER installation_invalidate AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jobbuf.installation
    FOR EACH STATEMENT EXECUTE FUNCTION jobbuf.installation_changed_trigger();

GRANT SELECT ON jobbuf.installation TO jobbuf_admin;

-- Jobs staged before the update record this installation's identity (set by an UPDATE rather
-- than by ADD COLUMN's default, which would leave the catalog unlike a fresh 1.2's).
ALTER TABLE jobbuf.jobs ADD COLUMN origin uuid, ADD COLUMN owner uuid;
UPDATE jobbuf.jobs SET origin = jobbuf.installation_id(), owner = jobbuf.installation_id();
ALTER TABLE jobbuf.jobs
    ALTER COLUMN origin SET DEFAULT jobbuf.installation_id(), ALTER COLUMN origin SET NOT NULL,
    ALTER COLUMN owner SET DEFAULT jobbuf.installation_id(), ALTER COLUMN owner SET NOT NULL;
DROP INDEX jobbuf.jobs_waiting;
CREATE INDEX jobs_waiting ON jobbuf.jobs (queue, owner, id) WHERE group_id IS NULL;

-- Claims and statistics skip held jobs.
CREATE OR REPLACE FUNCTION jobbuf.claim_statement(partitioned boolean, by_run_at boolean)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.format($sql$
        WITH waiting AS MATERIALIZED (
            SELECT j.id, j.run_at, j.staged_at FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL AND j.run_at <= pg_catalog.now() AND %1$s
            ORDER BY %2$s LIMIT $2 FOR UPDATE OF j SKIP LOCKED
        ), expired AS MATERIALIZED (
            SELECT j.id, j.run_at, j.staged_at FROM jobbuf.jobs j
            WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
              AND j.run_at <= pg_catalog.now() AND %1$s
            ORDER BY %2$s LIMIT $2 FOR UPDATE OF j SKIP LOCKED
        ), picked AS MATERIALIZED (
            SELECT c.id, c.run_at, c.staged_at
            FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) c
            ORDER BY %3$s LIMIT $2
        ), gate AS (
            SELECT coalesce(pg_catalog.count(*) >= $6 OR pg_catalog.min(greatest(p.staged_at, p.run_at)) <= pg_catalog.now() - $7, false) AS open
            FROM picked p
        ), claimed AS (
            UPDATE jobbuf.jobs j SET group_id = $4, lease_until = pg_catalog.now() + $5,
                attempts = j.attempts + CASE WHEN j.group_id IS NULL THEN 0 ELSE 1 END,
                last_error = CASE WHEN j.group_id IS NULL THEN j.last_error ELSE 'lease expired' END
            FROM picked p
            WHERE j.id = p.id AND (SELECT g.open FROM gate g)
            RETURNING j.group_id, j.id, j.payload, j.attempts, j.partition_key, j.staged_at, j.run_at
        )
        SELECT c.group_id, c.id, c.payload, c.attempts, c.partition_key, c.staged_at
        FROM claimed c ORDER BY %3$s
        $sql$,
        CASE WHEN partitioned THEN 'j.partition_key = $3' ELSE 'j.partition_key IS NULL' END,
        jobbuf.claim_order('j', by_run_at),
        jobbuf.claim_order('c', by_run_at));
$$;

CREATE OR REPLACE FUNCTION jobbuf.partition_in_flight(queue text, part text)
RETURNS boolean LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM jobbuf.jobs j
                   WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()
                     AND j.partition_key = $2);
$$;

CREATE OR REPLACE FUNCTION jobbuf.partition_claimable(queue text, part text)
RETURNS boolean LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (EXISTS (SELECT 1 FROM jobbuf.jobs j
                    WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL AND j.partition_key = $2
                      AND j.run_at <= pg_catalog.now())
            OR EXISTS (SELECT 1 FROM jobbuf.jobs j
                       WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
                         AND j.partition_key = $2 AND j.run_at <= pg_catalog.now()))
       AND NOT jobbuf.partition_in_flight($1, $2);
$$;

-- The queue named, or every queue when NULL (an unknown name is an error, as everywhere).
CREATE FUNCTION jobbuf.held_jobs_of(queue text)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT j.id FROM jobbuf.jobs j
    WHERE j.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND ($1 IS NULL OR j.queue OPERATOR(pg_catalog.=) (jobbuf.known_queue($1)).name);
$$;

-- Gives this installation a new identity (superusers only): for a clone of a cluster
-- (pg_basebackup, a disk snapshot, a standby promoted while its primary still runs) that is meant
-- to live beside its original. Every job staged before becomes held (it is a copy of one the
-- original delivers); jobs staged afterwards carry the new identity, and the worker uses a
-- delivery marker of its own. Returns the new identity.
CREATE FUNCTION jobbuf_reset_identity()
RETURNS uuid LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    -- A statement on jobbuf.queues makes the worker reload when this commits, reading the new
    -- identity (its lease, marker and connection name follow it).
    UPDATE jobbuf.queues SET paused = paused WHERE false;
    UPDATE jobbuf.installation
    SET id = pg_catalog.gen_random_uuid(), created_at = pg_catalog.now(),
        database_oid = (SELECT d.oid FROM pg_catalog.pg_database d
                        WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
    RETURNING id;
$$;

-- Privileges of the new functions, as 90_privileges.sql gives them (jobbuf_release_restored and
-- jobbuf_discard_restored get theirs where they are defined, below).
REVOKE ALL ON FUNCTION jobbuf.installation_id() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.installation_changed_trigger() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.held_jobs_of(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_reset_identity() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf.installation_id() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin;
-- Clients: jobbuf_queue_for, the framework queue lookup (src/sql/95_clients.sql).

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

-- Claims (src/sql/00_schema.sql, 40_claim_slots.sql, 41_claim.sql): claim-lock slots made by the first claim that
-- needs one instead of 257 rows per queue at its creation (a database restored by pg_restore -j
-- had none, and every claim needing one failed); claims without partition key bounded in work
-- (they walked every partition); error texts of failed jobs bounded to 8,192 characters (a
-- longer one could make every later claim of the queue fail). See docs/claims.md.
CREATE INDEX jobs_partition_leased ON jobbuf.jobs (queue, partition_key, lease_until)
    WHERE group_id IS NOT NULL AND partition_key IS NOT NULL;

DROP TRIGGER queues_claim_locks ON jobbuf.queues;
DROP FUNCTION jobbuf.queue_claim_locks_trigger();
DROP FUNCTION jobbuf.add_claim_locks(text);
-- The slots of queues that were never claimed go; claims make the slots they need again.
TRUNCATE jobbuf.claim_locks;
COMMENT ON TABLE jobbuf.claim_locks IS 'row locks that serialize the claims of one partition or of one max_in_flight queue: slot -1 is the queue''s own, 0-255 its partitions''; made by the first claim of the queue that needs one';

-- Makes the claim slots of a queue, all 257 at once, when a claim first needs one. Never waits:
-- it holds the queue's row (FOR NO KEY UPDATE, as an administrative change does) until its
-- transaction ends, and finding that row held means another claim is making the slots now (or an
-- administrative change or a drop of the queue is under way): false, the slot is taken. Holding
-- the queue's row, no other transaction can be inserting slots of the queue, so the insert never
-- waits either. True when the slots exist (nobody else sees them before this transaction ends).
CREATE FUNCTION jobbuf.make_claim_locks(queue_name text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM 1 FROM jobbuf.queues q WHERE q.name = queue_name FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO jobbuf.claim_locks (queue, slot)
    SELECT queue_name, s.slot FROM pg_catalog.generate_series(-1, 255) s (slot)
    ON CONFLICT DO NOTHING;
    RETURN true;
END $$;

-- Takes a claim slot of the queue without waiting: the queue's own slot when part is NULL, else
-- the partition's. False when another transaction holds it (or the queue was dropped meanwhile).
-- A queue without slots yet gets them (jobbuf.make_claim_locks).
CREATE OR REPLACE FUNCTION jobbuf.try_claim_lock(queue_name text, part text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    wanted constant integer := CASE WHEN part IS NULL THEN -1 ELSE pg_catalog.hashtext(part) & 255 END;
BEGIN
    PERFORM 1 FROM jobbuf.claim_locks l
    WHERE l.queue = queue_name AND l.slot = wanted
    FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
        RETURN true;
    END IF;
    IF EXISTS (SELECT 1 FROM jobbuf.claim_locks l WHERE l.queue = queue_name AND l.slot = wanted)
       OR NOT jobbuf.make_claim_locks(queue_name) THEN
        RETURN false;  -- held by another claim, or its slots are being made
    END IF;
    -- Made now by this transaction, or by one that ended since: free unless another claim took it.
    PERFORM 1 FROM jobbuf.claim_locks l
    WHERE l.queue = queue_name AND l.slot = wanted
    FOR UPDATE SKIP LOCKED;
    RETURN FOUND;
END $$;

-- The error text jobbuf keeps for a failed job: at most 8,192 characters; a longer text keeps
-- its first 8,192 characters followed by a marker with its length. It bounds what a consumer can
-- store per job (jobbuf_fail: last_error, and the dead letter's errors), so that no stored text
-- can make a later statement fail (a jsonb string holds less than 256 MB: one error as long
-- made every claim of its queue fail when the job was buried).
CREATE FUNCTION jobbuf.bounded_error(error text)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN pg_catalog.length(error) <= 8192 THEN error
                ELSE pg_catalog.left(error, 8192)
                     || pg_catalog.format(' [jobbuf: error truncated, %s characters]', pg_catalog.length(error)) END;
$$;

-- The candidates of a claim without partition key, best first (see "Bounded claims" above): the
-- partitions of the first $2 ready jobs of the queue in queue order (index jobs_waiting) and of
-- the first $2 expired leases (index jobs_leased), each ranked by its first job among them, at
-- most $3 of them. NULL stands for the jobs without partition key (they form no partition, have
-- no in-flight limit, and compete by their own first ready job). $1 is the queue, compared as
-- (SELECT $1) so that the plan does not depend on the queue: planned for a queue that holds
-- most rows of the table, the probe would walk jobs_pkey in id order past every claimed job
-- (as the worker's generic plan, see jobbuf.jobs's n_distinct in 00_schema.sql).
CREATE OR REPLACE FUNCTION jobbuf.claim_candidates_statement(by_run_at boolean)
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.format($sql$
        WITH ready (part, id, run_at) AS (
            (SELECT j.partition_key, j.id, j.run_at FROM jobbuf.jobs j
             WHERE j.queue = (SELECT $1) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
               AND j.run_at <= pg_catalog.now()
             ORDER BY %1$s LIMIT $2)
          UNION ALL
            (SELECT j.partition_key, j.id, j.run_at FROM jobbuf.jobs j
             WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL
               AND j.lease_until <= pg_catalog.now() AND j.run_at <= pg_catalog.now()
             ORDER BY j.lease_until LIMIT $2)
        ), firsts AS (
            SELECT DISTINCT ON (r.part) r.part, r.id, r.run_at FROM ready r
            ORDER BY r.part, %2$s
        )
        SELECT f.part FROM firsts f ORDER BY %3$s LIMIT $3
        $sql$,
        jobbuf.claim_order('j', by_run_at),
        jobbuf.claim_order('r', by_run_at),
        jobbuf.claim_order('f', by_run_at));
$$;

-- Up to $3 partitions of queue $1 that have waiting jobs, in key order from key $2 on (''
-- for the first), by a skip scan over jobs_partition_waiting: one index probe per partition.
CREATE FUNCTION jobbuf.partitions_from_statement()
RETURNS text LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT $sql$
        WITH RECURSIVE parts (part, n) AS (
            (SELECT j.partition_key, 1 FROM jobbuf.jobs j
             WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
               AND j.partition_key IS NOT NULL AND j.partition_key >= $2
             ORDER BY j.partition_key LIMIT 1)
          UNION ALL
            SELECT (SELECT j.partition_key FROM jobbuf.jobs j
                    WHERE j.queue = $1 AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
                      AND j.partition_key IS NOT NULL AND j.partition_key > p.part
                    ORDER BY j.partition_key LIMIT 1), p.n + 1
            FROM parts p WHERE p.part IS NOT NULL AND p.n < $3
        )
        SELECT p.part FROM parts p WHERE p.part IS NOT NULL
    $sql$;
$$;

-- The partition key of a waiting job of the queue picked at random (an id drawn between the
-- queue's first and last waiting job, then the first of at most 1,000 waiting jobs from there
-- that has a partition key); NULL when there is none. Where the second round of a bounded claim
-- starts, so that successive claims look at different partitions. (SELECT queue): as in
-- jobbuf.claim_candidates_statement, a plan that walks jobs_waiting whatever the queue.
CREATE FUNCTION jobbuf.random_partition(queue text)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first_id bigint;
    last_id bigint;
    picked text;
BEGIN
    SELECT j.id INTO first_id FROM jobbuf.jobs j
    WHERE j.queue = (SELECT random_partition.queue) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
    ORDER BY j.id LIMIT 1;
    SELECT j.id INTO last_id FROM jobbuf.jobs j
    WHERE j.queue = (SELECT random_partition.queue) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
    ORDER BY j.id DESC LIMIT 1;
    IF first_id IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT w.partition_key INTO picked FROM (
        SELECT j.partition_key FROM jobbuf.jobs j
        WHERE j.queue = (SELECT random_partition.queue) AND j.owner = jobbuf.installation_id() AND j.group_id IS NULL
          AND j.id >= first_id + pg_catalog.floor(pg_catalog.random() * (last_id - first_id + 1))::bigint
        ORDER BY j.id LIMIT 1000) w
    WHERE w.partition_key IS NOT NULL LIMIT 1;
    RETURN picked;
END $$;

-- Claims a group of one partition with the statement of jobbuf.claim_statement (the same
-- parameters, $3 the partition): nothing when the partition has nothing ready or a group in
-- flight (its slot is then not locked), or when another claim holds its slot.
CREATE FUNCTION jobbuf.claim_partition(queue text, part text, by_run_at boolean, batch integer,
                                       new_group uuid, lease interval, min_jobs integer,
                                       max_wait_for interval)
RETURNS TABLE (group_id uuid, id bigint, payload jsonb, attempts integer, partition text,
               staged_at timestamptz)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT jobbuf.partition_claimable(queue, part) THEN
        RETURN;  -- nothing to take: no slot is locked for it
    END IF;
    IF NOT jobbuf.try_claim_lock(queue, part) THEN
        RETURN;  -- another claim of this partition (or of one sharing its slot) is deciding
    END IF;
    -- A statement of its own, so that its snapshot is taken after the lock is held: it sees
    -- the group of a claim that committed just before (the rule re-checked, as above).
    IF jobbuf.partition_in_flight(queue, part) THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE jobbuf.claim_statement(true, by_run_at)
        USING queue, batch, part, new_group, lease, min_jobs, max_wait_for;
END $$;

-- jobbuf.bury_abandoned and jobbuf_fail bound their error texts too (jobbuf.bounded_error);
-- they are replaced once, in the dead-letters section below, which also makes them carry
-- the jobs' origin and owner, and jobbuf_fail count consumer failures.

-- The claim itself, for any queue (see "Who claims" above): jobbuf_claim for consumers, and the
-- worker for group delivery. q is the queue's row (jobbuf.known_queue).
CREATE OR REPLACE FUNCTION jobbuf.claim(q jobbuf.queues, batch_size integer, partition_key text)
RETURNS TABLE (group_id uuid, id bigint, payload jsonb, attempts integer, partition text,
               staged_at timestamptz)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    wanted_partition constant text := partition_key;
    batch integer := batch_size;
    by_run_at boolean;
    lease interval;
    min_jobs integer;
    max_wait_for interval;
    max_groups integer;
    new_group uuid;
    candidate record;
    -- The bounds of a claim without partition key (see "Bounded claims" above).
    probe_jobs constant integer := 1000;
    probe_partitions constant integer := 64;
    start_key text;
    from_key text;
    tried integer := 0;
BEGIN
    IF batch IS NULL THEN
        batch := coalesce((q.options->>'batch_size')::integer, 100);
    ELSIF batch < 1 OR batch > 100000 THEN
        RAISE EXCEPTION 'jobbuf: batch_size must be between 1 and 100000, not %', batch
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass NULL to use the queue''s option batch_size (default 100)';
    END IF;
    IF q.paused THEN
        RETURN;
    END IF;
    by_run_at := coalesce(q.options->>'order', 'id') = 'run_at';
    lease := pg_catalog.make_interval(secs => coalesce((q.options->>'visibility')::integer, 300));
    min_jobs := least(coalesce((q.options->>'min_batch')::integer, 1), batch);
    max_wait_for := pg_catalog.make_interval(secs => (q.options->>'max_wait')::float8);
    max_groups := (q.options->>'max_in_flight')::integer;
    new_group := pg_catalog.gen_random_uuid();
    PERFORM jobbuf.bury_abandoned(q);

    IF max_groups IS NOT NULL THEN
        IF NOT jobbuf.try_claim_lock(q.name, NULL) THEN
            RETURN;  -- another claim of this queue is deciding right now
        END IF;
        IF (SELECT pg_catalog.count(DISTINCT j.group_id) FROM jobbuf.jobs j
            WHERE j.queue = q.name AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now()) >= max_groups THEN
            RETURN;
        END IF;
    END IF;

    IF wanted_partition IS NOT NULL THEN
        RETURN QUERY SELECT * FROM jobbuf.claim_partition(q.name, wanted_partition, by_run_at, batch,
                                                          new_group, lease, min_jobs, max_wait_for);
        RETURN;
    END IF;

    -- Bounded (see "Bounded claims" above): the partitions of the oldest ready jobs first.
    FOR candidate IN EXECUTE jobbuf.claim_candidates_statement(by_run_at)
                     USING q.name, probe_jobs, probe_partitions LOOP
        IF candidate.part IS NULL THEN
            RETURN QUERY EXECUTE jobbuf.claim_statement(false, by_run_at)
                USING q.name, batch, NULL::text, new_group, lease, min_jobs, max_wait_for;
        ELSE
            RETURN QUERY SELECT * FROM jobbuf.claim_partition(q.name, candidate.part, by_run_at, batch,
                                                              new_group, lease, min_jobs, max_wait_for);
        END IF;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
    -- Then partitions in key order from a random one's, wrapping around to the first.
    start_key := jobbuf.random_partition(q.name);
    IF start_key IS NULL THEN
        RETURN;
    END IF;
    FOREACH from_key IN ARRAY ARRAY[start_key, ''] LOOP
        EXIT WHEN tried >= probe_partitions;
        FOR candidate IN EXECUTE jobbuf.partitions_from_statement()
                         USING q.name, from_key, probe_partitions - tried LOOP
            EXIT WHEN from_key = '' AND candidate.part >= start_key;  -- wrapped around
            tried := tried + 1;
            RETURN QUERY SELECT * FROM jobbuf.claim_partition(q.name, candidate.part, by_run_at, batch,
                                                              new_group, lease, min_jobs, max_wait_for);
            IF FOUND THEN
                RETURN;
            END IF;
        END LOOP;
    END LOOP;
END $$;

-- Error texts stored before the update get the same bound.
UPDATE jobbuf.jobs SET last_error = jobbuf.bounded_error(last_error) WHERE pg_catalog.length(last_error) OPERATOR(pg_catalog.>) 8192;
UPDATE jobbuf.dead SET last_error = jobbuf.bounded_error(last_error) WHERE pg_catalog.length(last_error) OPERATOR(pg_catalog.>) 8192;

-- Privileges, as 90_privileges.sql gives them: jobbuf_fail was replaced above (CREATE OR REPLACE
-- keeps its grants, not SECURITY DEFINER); the new functions are the extension owner's only.
ALTER FUNCTION jobbuf_fail(uuid, text, bigint[]) SECURITY DEFINER;
REVOKE ALL ON FUNCTION jobbuf.make_claim_locks(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.bounded_error(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.partitions_from_statement() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.random_partition(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.claim_partition(text, text, boolean, integer, uuid, interval, integer, interval) FROM PUBLIC;
-- Switching a queue from delivery 'group' to 'each': the jobs it holds were staged without the
-- target's payload checks; jobbuf_alter_queue checks them now and refuses the switch for a job
-- that cannot be delivered on its own.
-- Checks one job of a queue that switches from delivery 'group' to 'each' against its target, as
-- staging would have: jobs staged under 'group' were not (src/staging/delivery_switch_check.cpp).
CREATE FUNCTION jobbuf.check_each_payload(queue text, target text, id bigint, payload jsonb)
RETURNS void LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'jobbuf_check_each_payload';

-- A change of delivery mode leaves the groups in flight leased, and says so: their consumers
-- may be working on them, and can still read them (jobbuf_group) and finish them
-- (jobbuf_complete, jobbuf_fail). Releasing them at once would deliver their jobs a second time
-- while that work goes on; refusing the change would make it wait for every lease, which a
-- consumer's heartbeat (jobbuf_extend) can prolong forever, and a switch away from group
-- delivery is often made because its consumers fail. A lease that expires is handled the new way:
-- its jobs are claimed again as a group, or released by the worker and delivered one by one.
CREATE OR REPLACE FUNCTION jobbuf_alter_queue(queue text, options jsonb)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q jobbuf.queues := jobbuf.locked_queue(queue);
    merged jsonb;
    delivery text;
    leased bigint;
    waited_lock text;
BEGIN
    IF options IS NULL OR jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'jobbuf: queue options must be a JSON object'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A JSON null removes an option; anything else replaces it.
    merged := jsonb_strip_nulls(q.options || options);
    UPDATE jobbuf.queues SET options = jobbuf.checked_options(q.target, merged) WHERE name = q.name;
    delivery := coalesce(merged->>'delivery', 'each');
    -- From 'group' to 'each': every job the queue holds (waiting, or in a group whose lease may
    -- expire) becomes a message of its own, so it must suit the target as a staged job does.
    -- Stagers still in progress are waited for (they may have staged under 'group'), at most
    -- 2 s: while this lock waits, every new staging transaction of every queue queues behind it.
    IF q.target OPERATOR(pg_catalog.<>) 'none' AND delivery OPERATOR(pg_catalog.=) 'each'
       AND coalesce(q.options OPERATOR(pg_catalog.->>) 'delivery', 'each') OPERATOR(pg_catalog.=) 'group' THEN
        waited_lock := pg_catalog.current_setting('lock_timeout');
        PERFORM pg_catalog.set_config('lock_timeout', '2s', true);
        BEGIN
            LOCK TABLE jobbuf.jobs IN SHARE ROW EXCLUSIVE MODE;
        EXCEPTION WHEN lock_not_available THEN
            RAISE EXCEPTION 'jobbuf: queue %: transactions that stage jobs are still open; the switch to delivery each waited 2 s for them', pg_catalog.quote_literal(q.name)
                USING ERRCODE = 'lock_not_available',
                      HINT = 'retry; a session idle in transaction after staging (pg_stat_activity) holds it up';
        END;
        PERFORM pg_catalog.set_config('lock_timeout', waited_lock, true);
        PERFORM jobbuf.check_each_payload(q.name, q.target, j.id, j.payload)
        FROM jobbuf.jobs j WHERE j.queue OPERATOR(pg_catalog.=) q.name ORDER BY j.id;
    END IF;
    IF q.target <> 'none' AND delivery <> coalesce(q.options->>'delivery', 'each') THEN
        SELECT pg_catalog.count(DISTINCT j.group_id) INTO leased FROM jobbuf.jobs j
        WHERE j.queue = q.name AND j.group_id IS NOT NULL AND j.lease_until > pg_catalog.now();
        IF leased > 0 THEN
            RAISE NOTICE 'jobbuf: queue %: % groups in flight keep their lease', pg_catalog.quote_literal(q.name), leased
                USING DETAIL = 'their consumers can still read them with jobbuf_group and finish them with jobbuf_complete or jobbuf_fail',
                      HINT = CASE WHEN delivery = 'each'
                                  THEN 'the jobs of a group whose lease expires are delivered one by one'
                                  ELSE 'a group whose lease expires is claimed and delivered again as a group' END;
        END IF;
    END IF;
END $$;
REVOKE ALL ON FUNCTION jobbuf.check_each_payload(text, text, bigint, jsonb) FROM PUBLIC;

-- Operations: metrics (src/sql/00_schema.sql, 30_inspection.sql, 42_claim_settle.sql, 90_privileges.sql;
-- docs/operations.md). The worker's census of each queue in jobbuf.queue_stats, consumer
-- failures counted apart, jobbuf_stats() in O(queues), jobbuf_queue_metrics(), the exporter's
-- functions and the jobbuf_monitor role.
ALTER TABLE jobbuf.queue_stats
    ADD COLUMN consumer_failed_total bigint,
    ADD COLUMN ready bigint, ADD COLUMN scheduled bigint, ADD COLUMN claimed bigint,
    ADD COLUMN held bigint, ADD COLUMN dead bigint, ADD COLUMN oldest_ready_at timestamptz,
    ADD COLUMN delivered_last_minute bigint, ADD COLUMN queue_time_p50 interval,
    ADD COLUMN queue_time_p99 interval, ADD COLUMN census_at timestamptz, ADD COLUMN census_by uuid;
-- Set by an UPDATE rather than by ADD COLUMN's default (the catalog of a fresh 1.2 has none).
UPDATE jobbuf.queue_stats SET consumer_failed_total = 0;
ALTER TABLE jobbuf.queue_stats
    ALTER COLUMN consumer_failed_total SET DEFAULT 0, ALTER COLUMN consumer_failed_total SET NOT NULL;

-- Consumer failures not yet counted: jobbuf_fail appends one row per call (a row of its own, so
-- failing consumers never wait for each other or for the worker on a shared counter), and the
-- worker's census moves them into jobbuf.queue_stats.consumer_failed_total.
CREATE TABLE jobbuf.consumer_failures (
    queue  text NOT NULL,
    failed bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('jobbuf.consumer_failures', '');
GRANT SELECT ON jobbuf.consumer_failures TO jobbuf_admin;

-- Each queue's counters as jobbuf_stats() and jobbuf_queue_metrics() show them: the census
-- counts only when this installation took them (a restored dump or a copy carries its original's
-- until its own worker counts again), consumer failures appended since the last census added.
CREATE FUNCTION jobbuf.queue_counters()
RETURNS TABLE (queue text, target text, paused boolean, ready bigint, scheduled bigint, claimed bigint,
               held bigint, dead bigint, oldest_ready_at timestamptz, delivered_total bigint,
               rejected_total bigint, consumer_failed_total bigint, last_error text,
               last_delivery_at timestamptz, delivered_last_minute bigint, queue_time_p50 interval,
               queue_time_p99 interval, census_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT q.name, q.target, q.paused,
           coalesce(c.ready, 0), coalesce(c.scheduled, 0), coalesce(c.claimed, 0),
           coalesce(c.held, 0), coalesce(c.dead, 0), c.oldest_ready_at,
           coalesce(s.delivered_total, 0), coalesce(s.failed_total, 0),
           coalesce(s.consumer_failed_total, 0) OPERATOR(pg_catalog.+) coalesce(f.failed, 0),
           s.last_error, s.last_delivery_at,
           c.delivered_last_minute, c.queue_time_p50, c.queue_time_p99, c.census_at
    FROM jobbuf.queues q
    LEFT JOIN jobbuf.queue_stats s ON s.queue OPERATOR(pg_catalog.=) q.name
    LEFT JOIN jobbuf.queue_stats c ON c.queue OPERATOR(pg_catalog.=) q.name
                                  AND c.census_by OPERATOR(pg_catalog.=) jobbuf.installation_id()
    LEFT JOIN (SELECT u.queue, pg_catalog.sum(u.failed)::bigint AS failed
               FROM jobbuf.consumer_failures u GROUP BY u.queue) f ON f.queue OPERATOR(pg_catalog.=) q.name;
$$;

-- One row per queue, from jobbuf.queue_stats: O(queues), whatever the backlog. ready, scheduled,
-- claimed, dead and oldest_ready_age are as of the worker's last census (at most
-- jobbuf.poll_interval old while the worker runs; 0 before the first one), paused and 'none'
-- queues included, held jobs in none of them. failed_total: the jobs Redis rejected plus those
-- consumers failed (jobbuf_fail), these counted at once.
CREATE OR REPLACE FUNCTION jobbuf_stats()
RETURNS TABLE (queue text, target text, paused boolean, ready bigint, scheduled bigint,
               claimed bigint, dead bigint, oldest_ready_age interval, delivered_total bigint,
               failed_total bigint, last_error text, last_delivery_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.queue, c.target, c.paused, c.ready, c.scheduled, c.claimed, c.dead,
           pg_catalog.now() OPERATOR(pg_catalog.-) c.oldest_ready_at, c.delivered_total,
           c.rejected_total OPERATOR(pg_catalog.+) c.consumer_failed_total, c.last_error, c.last_delivery_at
    FROM jobbuf.queue_counters() c
    ORDER BY c.queue;
$$;

-- Per queue, what an operator alerts on (docs/operations.md): the census counts as in
-- jobbuf_stats() plus held; the totals, Redis rejections and consumer failures apart; and the
-- worker's last minute of deliveries: delivered_per_second (deliveries of the last 60 s / 60)
-- and the time in queue, from greatest(staged_at, run_at) to delivery, p50 and p99 (NULL when
-- nothing was delivered in that minute). The minute is the one before the last census; a
-- census older than a minute (no worker) shows 0 and NULL.
CREATE FUNCTION jobbuf_queue_metrics()
RETURNS TABLE (queue text, ready bigint, scheduled bigint, claimed bigint, held bigint, dead bigint,
               oldest_ready_age interval, delivered_total bigint, rejected_total bigint,
               consumer_failed_total bigint, delivered_per_second float8,
               queue_time_p50 interval, queue_time_p99 interval)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.queue, c.ready, c.scheduled, c.claimed, c.held, c.dead,
           pg_catalog.now() OPERATOR(pg_catalog.-) c.oldest_ready_at,
           c.delivered_total, c.rejected_total, c.consumer_failed_total,
           CASE WHEN recent THEN coalesce(c.delivered_last_minute, 0)::float8 OPERATOR(pg_catalog./) 60 ELSE 0 END,
           CASE WHEN recent THEN c.queue_time_p50 END,
           CASE WHEN recent THEN c.queue_time_p99 END
    FROM jobbuf.queue_counters() c,
         LATERAL (SELECT c.census_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute')) r(recent)
    ORDER BY c.queue;
$$;

-- What the Prometheus exporter reads (contrib/prometheus/queries.yaml): the metrics above in
-- seconds and with the database's name, so that the exporter's file holds no SQL of its own.
CREATE FUNCTION jobbuf_prometheus_queues()
RETURNS TABLE (datname text, queue text, ready bigint, scheduled bigint, claimed bigint, held bigint,
               dead bigint, oldest_ready_seconds float8, delivered_total bigint, failed_total bigint,
               rejected_total bigint, consumer_failed_total bigint, delivered_per_second float8,
               queue_time_p50_seconds float8, queue_time_p99_seconds float8)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text, m.queue, m.ready, m.scheduled, m.claimed, m.held, m.dead,
           coalesce(pg_catalog.date_part('epoch', m.oldest_ready_age), 0),
           m.delivered_total, m.rejected_total OPERATOR(pg_catalog.+) m.consumer_failed_total,
           m.rejected_total, m.consumer_failed_total, m.delivered_per_second,
           coalesce(pg_catalog.date_part('epoch', m.queue_time_p50), 'NaN'),
           coalesce(pg_catalog.date_part('epoch', m.queue_time_p99), 'NaN')
    FROM @extschema@.jobbuf_queue_metrics() m;
$$;

-- This database's drain worker for the exporter: running 0/1 and redis_connected 0/1 (0 when no
-- worker runs), one row whatever jobbuf_worker_status() says about other databases.
CREATE FUNCTION jobbuf_prometheus_worker()
RETURNS TABLE (datname text, running integer, redis_connected integer)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_catalog.current_database()::text,
           coalesce(pg_catalog.bool_or(w.running), false)::integer,
           coalesce(pg_catalog.bool_or(w.running AND w.redis_connected), false)::integer
    FROM @extschema@.jobbuf_worker_status() w
    WHERE w.database OPERATOR(pg_catalog.=) pg_catalog.current_database();
$$;

-- jobbuf_fail's count of consumer failures in jobbuf.consumer_failures (its "counted" step) is
-- part of its replacement in the claims section above.

-- The least-privilege monitoring role (docs/operations.md).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) 'jobbuf_monitor') THEN
        CREATE ROLE jobbuf_monitor NOLOGIN;
    END IF;
END $$;

-- As 90_privileges.sql gives them (CREATE OR REPLACE keeps grants, not SECURITY DEFINER).
REVOKE ALL ON FUNCTION jobbuf.queue_counters() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_queue_metrics() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_prometheus_queues() FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_prometheus_worker() FROM PUBLIC;
ALTER FUNCTION jobbuf_stats() SECURITY DEFINER;
ALTER FUNCTION jobbuf_queue_metrics() SECURITY DEFINER;
ALTER FUNCTION jobbuf_prometheus_queues() SECURITY DEFINER;
ALTER FUNCTION jobbuf_prometheus_worker() SECURITY DEFINER;
ALTER FUNCTION jobbuf_fail(uuid, text, bigint[]) SECURITY DEFINER;
GRANT EXECUTE ON FUNCTION jobbuf_queue_metrics() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT EXECUTE ON FUNCTION jobbuf_prometheus_queues() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT EXECUTE ON FUNCTION jobbuf_prometheus_worker() TO jobbuf_producer, jobbuf_consumer, jobbuf_admin, jobbuf_monitor;
GRANT EXECUTE ON FUNCTION jobbuf_stats() TO jobbuf_monitor;
GRANT EXECUTE ON FUNCTION jobbuf_worker_status() TO jobbuf_monitor;

-- Copies of a database, dead letters (src/sql/00_schema.sql, 41_claim.sql, 42_claim_settle.sql, 50_dead_letters.sql,
-- 60_copies.sql; docs/copies.md): a dead letter keeps its job's origin and owner, and
-- jobbuf_retry_dead puts it back with both, so a copy's retried dead letters are held there and a
-- retried job keeps the ids consumers saw. Held dead letters are adopted by
-- jobbuf_release_restored and deleted by jobbuf_discard_restored with the held jobs.
-- Dead letters kept before the update record this installation's identity, as the jobs do (set
-- by an UPDATE rather than by ADD COLUMN's default, which would leave the catalog unlike a fresh 1.2's).
ALTER TABLE jobbuf.dead ADD COLUMN origin uuid, ADD COLUMN owner uuid;
UPDATE jobbuf.dead SET origin = jobbuf.installation_id(), owner = jobbuf.installation_id();
ALTER TABLE jobbuf.dead
    ALTER COLUMN origin SET DEFAULT jobbuf.installation_id(), ALTER COLUMN origin SET NOT NULL,
    ALTER COLUMN owner SET DEFAULT jobbuf.installation_id(), ALTER COLUMN owner SET NOT NULL;

-- Every move into jobbuf.dead carries them (the worker's, for jobs Redis rejects, is in the library).
-- Moves to jobbuf.dead the jobs of the queue whose lease expired for the last allowed time
-- (attempts + 1 >= max_attempts), so that no claim hands them out again. Skips locked rows.
CREATE OR REPLACE FUNCTION jobbuf.bury_abandoned(q jobbuf.queues)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    WITH abandoned AS (
        SELECT j.id FROM jobbuf.jobs j
        WHERE j.queue = q.name AND j.owner = jobbuf.installation_id() AND j.group_id IS NOT NULL AND j.lease_until <= pg_catalog.now()
          AND j.attempts + 1 >= coalesce((q.options->>'max_attempts')::integer, 25)
        FOR UPDATE SKIP LOCKED
    ), buried AS (
        DELETE FROM jobbuf.jobs j USING abandoned a WHERE j.id = a.id
        RETURNING j.*
    )
    INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at, attempts,
                             last_error, errors, origin, owner)
    SELECT b.id, b.queue, b.payload, b.partition_key, b.unique_key, b.staged_at, b.attempts + 1,
           'lease expired',
           CASE WHEN b.last_error IS NULL THEN '[]'::jsonb
                ELSE pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                    'at', NULL, 'attempt', b.attempts, 'error', jobbuf.bounded_error(b.last_error))) END
           || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
                    'at', pg_catalog.now(), 'attempt', b.attempts + 1, 'error', 'lease expired')),
           b.origin, b.owner
    FROM buried b
    ON CONFLICT (id) DO NOTHING;
$$;

-- Fails the group's jobs (all, or those in ids) that still carry group_id, in one statement:
--  * attempts + 1 and last_error = error (at most 8,192 characters, see jobbuf.bounded_error);
--  * at max_attempts (default 25) the job moves to jobbuf.dead. Its `errors` holds what is known
--    without a history column on jobbuf.jobs: the previous error (last_error, its attempt number,
--    "at" null: its time was not kept) and the final one with its time: [{at, attempt, error}...];
--  * otherwise the job is released (group_id and lease_until NULL) to run again at
--    now() + backoff, backoff = least(backoff_max, backoff_base * 2^(attempts - 1)) seconds
--    (attempts counting this failure; defaults 1 and 3600), times a jitter factor drawn
--    uniformly from [0.75, 1]: retries of a failed batch spread out, and backoff_max stays
--    a true maximum;
--  * unique_key: a released job re-enters jobs_unique_waiting. If another job with the same
--    (queue, unique_key) is waiting by then (staged after this one was claimed), the waiting job
--    wins and the failed one is dropped: the waiting job does the same work, which is what a
--    unique key promises. Of several failed jobs with one key the one with the highest id stays.
--    A concurrent stager of the key is caught by the index (unique_violation), and the
--    statement is retried, then seeing the new job.
-- Returns how many jobs it handled (released, dead-lettered or dropped).
CREATE OR REPLACE FUNCTION jobbuf_fail(group_id uuid, error text, ids bigint[] DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gid constant uuid := jobbuf.checked_group_id(group_id);
    message constant text := jobbuf.bounded_error(error);
    only_ids constant bigint[] := ids;
    handled integer;
    retries integer := 0;
    violated text;
BEGIN
    IF message IS NULL THEN
        RAISE EXCEPTION 'jobbuf: the error of a failed group must not be NULL'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'pass a message saying why the jobs failed; it is kept in last_error';
    END IF;
    LOOP
        BEGIN
            WITH failing AS MATERIALIZED (
                SELECT j.id, j.queue, j.unique_key, j.attempts + 1 AS attempt,
                       j.attempts + 1 >= coalesce((q.options->>'max_attempts')::integer, 25) AS dies,
                       least(coalesce((q.options->>'backoff_max')::float8, 3600),
                             coalesce((q.options->>'backoff_base')::float8, 1)
                             * power(2::float8, least(j.attempts, 60))) AS delay
                FROM jobbuf.jobs j JOIN jobbuf.queues q ON q.name = j.queue
                WHERE j.group_id = gid AND (only_ids IS NULL OR j.id = ANY (only_ids))
                FOR UPDATE OF j
            ), counted AS (
                -- consumer_failed_total (30_inspection.sql): a row of this call's own, no shared counter
                INSERT INTO jobbuf.consumer_failures (queue, failed)
                SELECT f.queue, count(*) FROM failing f GROUP BY f.queue
            ), buried AS (
                DELETE FROM jobbuf.jobs j USING failing f
                WHERE j.id = f.id AND f.dies
                RETURNING j.id, j.queue, j.payload, j.partition_key, j.unique_key, j.staged_at,
                          f.attempt, j.last_error AS previous_error, j.origin, j.owner
            ), dead_letters AS (
                INSERT INTO jobbuf.dead (id, queue, payload, partition_key, unique_key, staged_at,
                                         attempts, last_error, errors, origin, owner)
                SELECT b.id, b.queue, b.payload, b.partition_key, b.unique_key, b.staged_at,
                       b.attempt, message,
                       CASE WHEN b.previous_error IS NULL THEN '[]'::jsonb
                            ELSE jsonb_build_array(jsonb_build_object(
                                'at', NULL, 'attempt', b.attempt - 1, 'error', jobbuf.bounded_error(b.previous_error))) END
                       || jsonb_build_array(jsonb_build_object(
                                'at', now(), 'attempt', b.attempt, 'error', message)),
                       b.origin, b.owner
                FROM buried b
            ), superseded AS MATERIALIZED (
                SELECT f.id FROM failing f
                WHERE NOT f.dies AND f.unique_key IS NOT NULL
                  AND (EXISTS (SELECT 1 FROM jobbuf.jobs w
                               WHERE w.queue = f.queue AND w.unique_key = f.unique_key
                                 AND w.group_id IS NULL)
                       OR EXISTS (SELECT 1 FROM failing o
                                  WHERE NOT o.dies AND o.queue = f.queue
                                    AND o.unique_key = f.unique_key AND o.id > f.id))
            ), dropped AS (
                DELETE FROM jobbuf.jobs j USING superseded s WHERE j.id = s.id
                RETURNING j.id
            ), released AS (
                UPDATE jobbuf.jobs j
                SET attempts = f.attempt, last_error = message, group_id = NULL, lease_until = NULL,
                    run_at = now() + make_interval(secs => f.delay * (0.75 + 0.25 * random()))
                FROM failing f
                WHERE j.id = f.id AND NOT f.dies AND f.id NOT IN (SELECT s.id FROM superseded s)
                RETURNING j.id
            )
            SELECT (SELECT count(*) FROM buried) + (SELECT count(*) FROM dropped)
                   + (SELECT count(*) FROM released)
            INTO handled;
            RETURN handled;
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
            retries := retries + 1;
            IF violated IS DISTINCT FROM 'jobs_unique_waiting' OR retries > 5 THEN
                RAISE;
            END IF;
            -- A job with the same unique_key was staged concurrently and has committed; the
            -- next attempt sees it and drops the failed duplicate.
        END;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION jobbuf_retry_dead(queue text, ids bigint[] DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q constant jobbuf.queues := jobbuf.known_queue(queue);
    only_ids constant bigint[] := ids;
    moved integer;
BEGIN
    WITH picked AS MATERIALIZED (
        SELECT d.* FROM jobbuf.dead d
        WHERE d.queue = q.name AND (only_ids IS NULL OR d.id = ANY (only_ids))
        ORDER BY d.id DESC
        FOR UPDATE
    ), revived AS (
        INSERT INTO jobbuf.jobs AS j (id, queue, payload, run_at, unique_key, partition_key,
                                      staged_at, attempts, last_error, origin, owner)
        SELECT p.id, p.queue, p.payload, now(), p.unique_key, p.partition_key, p.staged_at, 0,
               p.last_error, p.origin, p.owner
        FROM picked p ORDER BY p.id DESC
        ON CONFLICT DO NOTHING
        RETURNING j.id
    ), removed AS (
        DELETE FROM jobbuf.dead d USING revived r WHERE d.id = r.id RETURNING d.id
    )
    SELECT count(*) INTO moved FROM removed;
    RETURN moved;
END $$;

CREATE FUNCTION jobbuf.held_dead_letters_of(queue text)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT d.id FROM jobbuf.dead d
    WHERE d.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND ($1 IS NULL OR d.queue OPERATOR(pg_catalog.=) $1);
$$;

-- Adopts the held jobs of the queue (all queues when NULL): they are delivered or claimed like
-- jobs staged here, keeping their ids, their origin (so consumers see the ids the original
-- installation gave them, and can tell a job they already ran) and every other column.
CREATE FUNCTION jobbuf_release_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    released bigint;
    dead_letters bigint;
BEGIN
    UPDATE jobbuf.jobs j SET owner = jobbuf.installation_id()
    FROM jobbuf.held_jobs_of(jobbuf_release_restored.queue) h WHERE j.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS released = ROW_COUNT;
    IF released OPERATOR(pg_catalog.>) 0 THEN
        -- A statement on jobbuf.queues wakes the worker when this transaction commits.
        UPDATE jobbuf.queues SET paused = paused WHERE false;
    END IF;
    UPDATE jobbuf.dead d SET owner = jobbuf.installation_id()
    FROM jobbuf.held_dead_letters_of(jobbuf_release_restored.queue) h WHERE d.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS dead_letters = ROW_COUNT;
    RETURN released OPERATOR(pg_catalog.+) dead_letters;
END $$;

-- Deletes the held jobs of the queue (all queues when NULL).
CREATE FUNCTION jobbuf_discard_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    discarded bigint;
    dead_letters bigint;
BEGIN
    DELETE FROM jobbuf.jobs j USING jobbuf.held_jobs_of(jobbuf_discard_restored.queue) h WHERE j.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS discarded = ROW_COUNT;
    DELETE FROM jobbuf.dead d USING jobbuf.held_dead_letters_of(jobbuf_discard_restored.queue) h WHERE d.id OPERATOR(pg_catalog.=) h.id;
    GET DIAGNOSTICS dead_letters = ROW_COUNT;
    RETURN discarded OPERATOR(pg_catalog.+) dead_letters;
END $$;

-- Privileges, as 90_privileges.sql gives them (CREATE OR REPLACE keeps grants, not SECURITY DEFINER).
REVOKE ALL ON FUNCTION jobbuf.held_dead_letters_of(text) FROM PUBLIC;
ALTER FUNCTION jobbuf_fail(uuid, text, bigint[]) SECURITY DEFINER;
ALTER FUNCTION jobbuf_retry_dead(text, bigint[]) SECURITY DEFINER;
ALTER FUNCTION jobbuf_release_restored(text) SECURITY DEFINER;
ALTER FUNCTION jobbuf_discard_restored(text) SECURITY DEFINER;
REVOKE ALL ON FUNCTION jobbuf_release_restored(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf_discard_restored(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_release_restored(text) TO jobbuf_admin;
GRANT EXECUTE ON FUNCTION jobbuf_discard_restored(text) TO jobbuf_admin;

-- The census in bounded steps: the worker walks jobbuf.jobs in steps between its delivery
-- batches (docs/operations.md, "Where the counts come from").
-- The census: the worker's count of each queue's jobs, kept in jobbuf.queue_stats so that
-- jobbuf_stats() and jobbuf_queue_metrics() read one row per queue instead of counting jobs.
-- The drain worker walks jobbuf.jobs in steps of jobbuf.census_step between its delivery
-- batches, adds the steps' counts up in its memory and publishes them with
-- jobbuf.publish_census when the walk reaches the end (src/worker/queue_census.cpp);
-- jobbuf.take_census() does the same in one statement. Every job of jobbuf.jobs is counted in
-- exactly one state: 3 held (its owner is not this installation, 60_copies.sql), 2 claimed (its
-- group holds a lease), 0 ready (due and not claimed, or its lease expired: a claim takes it),
-- 1 scheduled (due later). since: when the oldest job of the row became ready,
-- greatest(staged_at, run_at). last_id: its largest id.

-- A job's state for the census, as the installation own sees it at now. Inlined into the
-- queries that call it (no SET clause: it names only pg_catalog's operators, schema-qualified).
CREATE FUNCTION jobbuf.job_state(owner uuid, group_id uuid, lease_until timestamptz, run_at timestamptz,
                                 own uuid, now timestamptz)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN owner OPERATOR(pg_catalog.<>) own THEN 3
                WHEN group_id IS NOT NULL AND lease_until OPERATOR(pg_catalog.>) now THEN 2
                WHEN run_at OPERATOR(pg_catalog.<=) now THEN 0
                ELSE 1 END;
$$;

-- One step: the jobs after id "after" (ids start at 1) in id order (jobs_pkey), at most
-- step_rows of them (all when NULL), counted per queue and state, the identity and now() read
-- once.
CREATE FUNCTION jobbuf.census_step(after bigint, step_rows integer)
RETURNS TABLE (queue text, state integer, jobs bigint, since timestamptz, last_id bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH own AS (
        SELECT jobbuf.installation_id() AS id, pg_catalog.now() AS now
    ), walked AS (
        SELECT j.id, j.queue, j.owner, j.group_id, j.lease_until, j.run_at, j.staged_at
        FROM jobbuf.jobs j WHERE j.id OPERATOR(pg_catalog.>) after ORDER BY j.id LIMIT step_rows
    )
    SELECT j.queue, t.state, pg_catalog.count(*), pg_catalog.min(greatest(j.staged_at, j.run_at)),
           pg_catalog.max(j.id)
    FROM walked j CROSS JOIN own o
    CROSS JOIN LATERAL (SELECT jobbuf.job_state(j.owner, j.group_id, j.lease_until, j.run_at, o.id, o.now)) t(state)
    GROUP BY j.queue, t.state;
$$;

-- Publishes a census: per queue (queues[i]) its ready, scheduled, claimed and held jobs and
-- when its oldest ready job became ready (a queue the arrays do not name has none), with the
-- dead letters of jobbuf.dead counted now; and the worker's last minute of deliveries per queue
-- (minute_queues, deliveries, queue time p50 and p99 in seconds; NULL arrays leave those
-- columns as they are). Consumer failures that jobbuf_fail appended to jobbuf.consumer_failures
-- are moved into consumer_failed_total. census_at: started_at, when the census began (every job
-- committed before then and still there at its end is counted). Returns the number of queues
-- counted. Superusers only (the worker).
CREATE FUNCTION jobbuf.publish_census(queues text[], ready bigint[], scheduled bigint[], claimed bigint[],
                                      held bigint[], oldest_ready timestamptz[], minute_queues text[],
                                      delivered bigint[], p50_seconds float8[], p99_seconds float8[],
                                      started_at timestamptz)
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    WITH waiting AS (
        SELECT w.queue, w.ready, w.scheduled, w.claimed, w.held, w.oldest_ready
        FROM ROWS FROM (pg_catalog.unnest(queues), pg_catalog.unnest(ready), pg_catalog.unnest(scheduled),
                        pg_catalog.unnest(claimed), pg_catalog.unnest(held), pg_catalog.unnest(oldest_ready))
             AS w(queue, ready, scheduled, claimed, held, oldest_ready)
    ), dead AS (
        SELECT d.queue, pg_catalog.count(*) AS dead FROM jobbuf.dead d GROUP BY d.queue
    ), counted_queues AS (
        -- A row another transaction holds (a manual census in a long transaction) is counted
        -- next time: the worker never waits for it.
        SELECT l.queue FROM jobbuf.queue_stats l FOR UPDATE SKIP LOCKED
    ), folded AS (
        -- The failures of the queues counted now, and those of dropped queues.
        DELETE FROM jobbuf.consumer_failures f
        WHERE f.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT cq.queue FROM counted_queues cq))
           OR NOT EXISTS (SELECT 1 FROM jobbuf.queue_stats e WHERE e.queue OPERATOR(pg_catalog.=) f.queue)
        RETURNING f.queue, f.failed
    ), failures AS (
        SELECT f.queue, pg_catalog.sum(f.failed)::bigint AS failed FROM folded f GROUP BY f.queue
    ), minute AS (
        SELECT m.queue, m.delivered, m.p50, m.p99
        FROM ROWS FROM (pg_catalog.unnest(minute_queues), pg_catalog.unnest(delivered),
                        pg_catalog.unnest(p50_seconds), pg_catalog.unnest(p99_seconds)) AS m(queue, delivered, p50, p99)
    ), counted AS (
        UPDATE jobbuf.queue_stats s
        SET ready = coalesce(w.ready, 0), scheduled = coalesce(w.scheduled, 0),
            claimed = coalesce(w.claimed, 0), held = coalesce(w.held, 0), dead = coalesce(d.dead, 0),
            oldest_ready_at = w.oldest_ready,
            consumer_failed_total = s.consumer_failed_total OPERATOR(pg_catalog.+) coalesce(f.failed, 0),
            delivered_last_minute = CASE WHEN minute_queues IS NULL THEN s.delivered_last_minute ELSE coalesce(m.delivered, 0) END,
            queue_time_p50 = CASE WHEN minute_queues IS NULL THEN s.queue_time_p50 ELSE pg_catalog.make_interval(secs => m.p50) END,
            queue_time_p99 = CASE WHEN minute_queues IS NULL THEN s.queue_time_p99 ELSE pg_catalog.make_interval(secs => m.p99) END,
            census_at = started_at, census_by = jobbuf.installation_id()
        FROM counted_queues s0
        LEFT JOIN waiting w ON w.queue OPERATOR(pg_catalog.=) s0.queue
        LEFT JOIN dead d ON d.queue OPERATOR(pg_catalog.=) s0.queue
        LEFT JOIN failures f ON f.queue OPERATOR(pg_catalog.=) s0.queue
        LEFT JOIN minute m ON m.queue OPERATOR(pg_catalog.=) s0.queue
        WHERE s.queue OPERATOR(pg_catalog.=) s0.queue
        RETURNING s.queue
    )
    SELECT pg_catalog.count(*)::integer FROM counted;
$$;

-- A census in one statement (by hand): every job counted in one pass, published with the
-- last minute of deliveries given (queue names, deliveries, queue time p50 and p99 in seconds;
-- NULL arrays leave those columns as they are). Returns the number of queues counted.
-- Superusers only.
CREATE FUNCTION jobbuf.take_census(queues text[] DEFAULT NULL, delivered bigint[] DEFAULT NULL,
                                   p50_seconds float8[] DEFAULT NULL, p99_seconds float8[] DEFAULT NULL)
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    WITH waiting AS (
        SELECT c.queue,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 0), 0)::bigint AS ready,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 1), 0)::bigint AS scheduled,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 2), 0)::bigint AS claimed,
               coalesce(pg_catalog.sum(c.jobs) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 3), 0)::bigint AS held,
               pg_catalog.min(c.since) FILTER (WHERE c.state OPERATOR(pg_catalog.=) 0) AS oldest_ready
        FROM (SELECT j.queue, t.state, pg_catalog.count(*) AS jobs,
                     pg_catalog.min(greatest(j.staged_at, j.run_at)) AS since
              FROM jobbuf.jobs j
              CROSS JOIN (SELECT jobbuf.installation_id() AS id, pg_catalog.now() AS now) o
              CROSS JOIN LATERAL (SELECT jobbuf.job_state(j.owner, j.group_id, j.lease_until, j.run_at, o.id, o.now)) t(state)
              GROUP BY j.queue, t.state) c
        GROUP BY c.queue
    )
    SELECT jobbuf.publish_census(pg_catalog.array_agg(w.queue), pg_catalog.array_agg(w.ready),
                                 pg_catalog.array_agg(w.scheduled), pg_catalog.array_agg(w.claimed),
                                 pg_catalog.array_agg(w.held), pg_catalog.array_agg(w.oldest_ready),
                                 queues, delivered, p50_seconds, p99_seconds, pg_catalog.now())
    FROM waiting w;
$$;
REVOKE ALL ON FUNCTION jobbuf.take_census(text[], bigint[], float8[], float8[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.job_state(uuid, uuid, timestamptz, timestamptz, uuid, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.census_step(bigint, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION jobbuf.publish_census(text[], bigint[], bigint[], bigint[], bigint[], timestamptz[], text[], bigint[], float8[], float8[], timestamptz) FROM PUBLIC;

-- Keep this statement last.
-- Wakes the drain worker when this update commits: a worker running the 1.2 library against 1.1
-- SQL waits for this update, and a statement on jobbuf.queues (its trigger) is what tells it.
UPDATE jobbuf.queues SET paused = paused WHERE false;
