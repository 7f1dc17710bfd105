-- jobbuf: copies of a database (docs/copies.md). Jobs whose owner is not this installation's
-- identity are held: restored from a dump, copied by CREATE DATABASE ... TEMPLATE, applied by
-- logical replication. The worker and claims skip them; an administrator adopts or deletes them.

-- The queue named, or every queue when NULL (an unknown name is an error, as everywhere).
CREATE FUNCTION jobbuf.held_jobs_of(queue text)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT j.id FROM jobbuf.jobs j
    WHERE j.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND ($1 IS NULL OR j.queue OPERATOR(pg_catalog.=) (jobbuf.known_queue($1)).name);
$$;

-- The held dead letters (jobbuf.dead) of the queue named, or of every queue when NULL.
CREATE FUNCTION jobbuf.held_dead_letters_of(queue text)
RETURNS TABLE (id bigint) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT d.id FROM jobbuf.dead d
    WHERE d.owner OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND ($1 IS NULL OR d.queue OPERATOR(pg_catalog.=) $1);
$$;

-- Adopts the held jobs of the queue (all queues when NULL): they are delivered or claimed like
-- jobs staged here, keeping their ids, their origin (so consumers see the ids the original
-- installation gave them, and can tell a job they already ran) and every other column. The
-- queue's held dead letters are adopted with them (jobbuf_retry_dead then stages them as this
-- installation's), and so are its held schedules (not counted). Returns the number of jobs and
-- dead letters adopted.
-- It also moves jobbuf.jobs_id_seq past every id the installation holds (jobs, dead letters,
-- archived jobs), never back: logical replication carries rows but not sequences, so a
-- subscriber taking over from its publisher (docs/copies.md, "Logical replication") would
-- otherwise stage its first jobs with ids it already holds.
CREATE FUNCTION jobbuf_release_restored(queue text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    released bigint;
    dead_letters bigint;
    top bigint;
BEGIN
    SELECT pg_catalog.max(h.id) INTO top FROM (
        SELECT pg_catalog.max(j.id) FROM jobbuf.jobs j
        UNION ALL SELECT pg_catalog.max(d.id) FROM jobbuf.dead d
        UNION ALL SELECT pg_catalog.max(a.id) FROM jobbuf.archive a) h (id);
    IF top OPERATOR(pg_catalog.>) (SELECT CASE WHEN s.is_called THEN s.last_value
                                               ELSE s.last_value OPERATOR(pg_catalog.-) 1 END
                                   FROM jobbuf.jobs_id_seq s) THEN
        PERFORM pg_catalog.setval('jobbuf.jobs_id_seq'::pg_catalog.regclass, top, true);
    END IF;
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
    -- The queue's held schedules fire from here on (not counted in the result).
    UPDATE jobbuf.schedules s SET installation = jobbuf.installation_id()
    WHERE s.installation OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND (jobbuf_release_restored.queue IS NULL
           OR s.queue OPERATOR(pg_catalog.=) jobbuf_release_restored.queue);
    RETURN released OPERATOR(pg_catalog.+) dead_letters;
END $$;

-- Deletes the held jobs and held dead letters of the queue (all queues when NULL); returns how
-- many. The queue's held schedules are deleted too (not counted).
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
    DELETE FROM jobbuf.schedules s
    WHERE s.installation OPERATOR(pg_catalog.<>) jobbuf.installation_id()
      AND (jobbuf_discard_restored.queue IS NULL
           OR s.queue OPERATOR(pg_catalog.=) jobbuf_discard_restored.queue);
    RETURN discarded OPERATOR(pg_catalog.+) dead_letters;
END $$;

-- Gives this installation a new identity (superusers only): for a clone of a cluster
-- (pg_basebackup, a disk snapshot, a standby promoted while its primary still runs) that is meant
-- to live beside its original. Every job staged before becomes held (it is a copy of one the
-- original delivers); jobs staged afterwards carry the new identity, and the worker uses a
-- delivery marker of its own. Returns the new identity.
-- (In a session with session_replication_role = replica, as a restore may run, the change would
-- be skipped as if replicated: the function runs as origin.)
CREATE FUNCTION jobbuf_reset_identity()
RETURNS uuid LANGUAGE sql SET search_path = pg_catalog, pg_temp SET session_replication_role = origin AS $$
    -- A statement on jobbuf.queues makes the worker reload when this commits, reading the new
    -- identity (its lease, marker and connection name follow it).
    UPDATE jobbuf.queues SET paused = paused WHERE false;
    UPDATE jobbuf.installation
    SET id = pg_catalog.gen_random_uuid(), created_at = pg_catalog.now(),
        database_oid = (SELECT d.oid FROM pg_catalog.pg_database d
                        WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
    RETURNING id;
$$;

-- Logical replication (docs/copies.md): a subscriber that has jobbuf keeps its own identity and
-- its own claim slots. A publication FOR ALL TABLES or FOR TABLES IN SCHEMA jobbuf carries the
-- publisher's jobbuf.installation row (its initial sync would fail on installation_pkey, and a
-- jobbuf_reset_identity() there would replace the subscriber's identity) and the publisher's
-- jobbuf.claim_locks rows (which collide with the slots the subscriber's own claims made). The
-- apply and tablesync workers run with session_replication_role = replica, as do other
-- replication tools; these triggers fire there too (ENABLE ALWAYS) and skip the row. Replicated
-- jobs and dead letters keep the publisher's owner and so arrive held. CREATE EXTENSION inserts
-- the installation row before the trigger exists (a restore may run with replica too).
CREATE FUNCTION jobbuf.skip_replicated_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica' THEN
        RETURN NULL;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER installation_not_replicated BEFORE INSERT OR UPDATE OR DELETE ON jobbuf.installation
    FOR EACH ROW EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.installation ENABLE ALWAYS TRIGGER installation_not_replicated;
-- Only the inserts: a replicated delete (the queue dropped on the publisher) still removes the slot.
CREATE TRIGGER claim_locks_not_replicated BEFORE INSERT ON jobbuf.claim_locks
    FOR EACH ROW EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.claim_locks ENABLE ALWAYS TRIGGER claim_locks_not_replicated;

-- Clones (docs/copies.md, "Clones and later starts"): the delivery counter. Every unit the drain
-- worker pushes carries a delivery number in its Redis marker, and the batch's own transaction
-- records it here (one row, updated in place by address; WAL-logged, so a crash, an immediate
-- shutdown or a standby that replayed the batch keeps it). A later start of this cluster proves
-- with it that it continues the start that holds the delivery lease; a copy of a running cluster
-- keeps the number it was copied with and falls behind at the original's next batch. Not dumped
-- (a restore has an identity, a marker and a lease of its own), not replicated (the trigger skips
-- rows a subscriber's apply would write: the subscriber counts its own batches).
-- take_over_requested: jobbuf_take_over() asked this cluster to take the lease from any holder;
-- take_over_start: the postmaster start that asked (only that start honours the request).
-- The holder also advances delivered_unit at least once per lease lifetime without batches and
-- carries it in its lease value; the worker's storage rotation keeps the row versions few.
CREATE TABLE jobbuf.delivery_counter (
    delivered_unit      bigint NOT NULL DEFAULT 0,
    take_over_requested boolean NOT NULL DEFAULT false,
    take_over_start     timestamptz,
    one_row             boolean PRIMARY KEY DEFAULT true CONSTRAINT delivery_counter_one_row CHECK (one_row)
);
COMMENT ON TABLE jobbuf.delivery_counter IS 'the delivery number of this cluster''s last batch (one row, not dumped): what tells a later start of this cluster from a copy; written by the drain worker and jobbuf_take_over()';
INSERT INTO jobbuf.delivery_counter DEFAULT VALUES;
-- Fires only under session_replication_role = replica (a subscriber's apply): no trigger call per batch.
CREATE TRIGGER delivery_counter_not_replicated BEFORE INSERT OR UPDATE OR DELETE ON jobbuf.delivery_counter
    FOR EACH ROW WHEN (pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica')
    EXECUTE FUNCTION jobbuf.skip_replicated_row();
ALTER TABLE jobbuf.delivery_counter ENABLE ALWAYS TRIGGER delivery_counter_not_replicated;

-- Makes this cluster the one that delivers this installation's jobs to its Redis (superusers
-- only): its drain worker takes the delivery lease at its next connection, whoever holds it. For
-- two clusters with one identity (a snapshot or pg_basebackup clone, a standby promoted while its
-- primary ran) where the one that should deliver is held: stop the other first. The other
-- holder's last marker is not acted on: the jobs it names stay staged here and are pushed again
-- (a batch the other had in flight may reach Redis twice; no job is lost).
CREATE FUNCTION jobbuf_take_over()
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET session_replication_role = origin AS $$
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r
                     WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER), false) THEN
        RAISE EXCEPTION 'jobbuf_take_over() is for superusers' USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- The request names this postmaster's start: a standby or a base backup taken before the
    -- worker acted on it carries the row but never honours it (its start differs).
    UPDATE jobbuf.delivery_counter
    SET take_over_requested = true, take_over_start = pg_catalog.pg_postmaster_start_time();
    -- A statement on jobbuf.queues makes the worker reload when this commits, reading the request.
    UPDATE jobbuf.queues SET paused = paused WHERE false;
END $$;
