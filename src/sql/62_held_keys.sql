-- jobbuf: a copy's unique keys (docs/copies.md, "Unique keys in a copy"). A held job (owned by
-- another installation: restored from a dump, copied by CREATE DATABASE ... TEMPLATE, applied by
-- logical replication) never blocks a job of this installation with the same (queue, unique_key):
-- where the two meet, this installation's job wins and the held one is discarded.
--
-- Why a trigger, and not an index that includes owner: jobs_unique_waiting stays the arbiter of
-- (queue, unique_key), so the 1.2 form INSERT ... ON CONFLICT (queue, unique_key) WHERE unique_key
-- IS NOT NULL AND group_id IS NULL DO NOTHING still infers it after ALTER EXTENSION UPDATE, and
-- two jobs of this installation still never share a key. BEFORE ROW triggers run before the
-- executor's speculative-insertion check, so a held row deleted here no longer conflicts.
--  * A row of this installation with a unique_key deletes the waiting held job with its key (one
--    probe of jobs_unique_waiting; rows without a key never call the function: the WHEN clause).
--  * A held row (a restore's COPY, a logical-replication apply, a retried held dead letter) whose
--    key a waiting job of this installation holds is skipped instead of failing on the index.
--  * A claimed job of this installation released to wait again (jobbuf_fail, an expired lease:
--    an UPDATE that sets group_id to NULL) deletes the waiting held job with its key as a new
--    job does; jobbuf_fail and the worker's release drop a released job only for a waiting job
--    of this installation with its key, never for a held one.
-- Enabled ALWAYS: the apply worker and replica-role restores run with
-- session_replication_role = replica, where ordinary triggers do not fire. The direct insert path
-- (src/staging/job_inserter.cpp) stages no unique_key, so it needs no part of this.
-- Limit: both rules read committed rows; a held and an own row with one key inserted by two
-- transactions at the same moment still meet on the index as two own rows would.

-- The held jobs discarded (or skipped) this way, until the worker's census counts them in its
-- LOG line about held jobs and deletes them (src/delivery/held_jobs.cpp). A row per discarded
-- job, never updated: stagers never wait for each other or for the worker on a counter. At most
-- one row per held job, so it stays as small as the held jobs were. Not dumped.
CREATE TABLE jobbuf.held_discards (
    queue        text NOT NULL,
    id           bigint NOT NULL,
    unique_key   text NOT NULL,
    discarded_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE jobbuf.held_discards IS 'held jobs discarded because a job of this installation took their unique_key; emptied by the worker''s census, which logs them';
-- No key: the whole row identifies it to logical replication (the census's DELETE under a
-- publication that publishes deletes), as for jobbuf.consumer_failures.
ALTER TABLE jobbuf.held_discards REPLICA IDENTITY FULL;

-- SECURITY DEFINER: producers may not read or delete other jobs; this deletes only a waiting job
-- of another installation with the key the producer is staging, which that job would block.
CREATE FUNCTION jobbuf.held_key_yields() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    own constant uuid := jobbuf.installation_id();
    discarded bigint;
BEGIN
    IF NEW.owner OPERATOR(pg_catalog.=) own THEN
        -- At most one: jobs_unique_waiting.
        DELETE FROM jobbuf.jobs j
        WHERE j.queue OPERATOR(pg_catalog.=) NEW.queue AND j.unique_key OPERATOR(pg_catalog.=) NEW.unique_key
          AND j.group_id IS NULL AND j.owner OPERATOR(pg_catalog.<>) own
        RETURNING j.id INTO discarded;
        IF discarded IS NOT NULL THEN
            INSERT INTO jobbuf.held_discards (queue, id, unique_key) VALUES (NEW.queue, discarded, NEW.unique_key);
        END IF;
        RETURN NEW;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        RETURN NEW;  -- a held row is never claimed, so never released: nothing to decide
    END IF;
    IF EXISTS (SELECT FROM jobbuf.jobs j
               WHERE j.queue OPERATOR(pg_catalog.=) NEW.queue AND j.unique_key OPERATOR(pg_catalog.=) NEW.unique_key
                 AND j.group_id IS NULL AND j.owner OPERATOR(pg_catalog.=) own) THEN
        INSERT INTO jobbuf.held_discards (queue, id, unique_key) VALUES (NEW.queue, NEW.id, NEW.unique_key);
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;
-- Named to fire after jobs_validate_and_wake (triggers fire in name order): nothing is deleted
-- for a row the validation refuses.
CREATE TRIGGER jobs_yield_held_key BEFORE INSERT OR UPDATE OF group_id ON jobbuf.jobs
    FOR EACH ROW WHEN (NEW.unique_key IS NOT NULL AND NEW.group_id IS NULL)
    EXECUTE FUNCTION jobbuf.held_key_yields();
ALTER TABLE jobbuf.jobs ENABLE ALWAYS TRIGGER jobs_yield_held_key;
