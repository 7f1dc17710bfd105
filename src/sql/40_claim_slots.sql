-- jobbuf: the claim slots, row locks in jobbuf.claim_locks through which the claims of one
-- partition, or of one max_in_flight queue, take turns without waiting (the claim: 41_claim.sql).
--
-- Serialization without waiting: the two rules that span several claims (one group in flight
-- per partition, at most max_in_flight groups per queue) need claimers of the same partition or
-- queue to take turns. They do so with row try-locks (FOR UPDATE SKIP LOCKED) on jobbuf.claim_locks:
-- a claimer that finds the row taken treats the partition (or the queue) as busy — exactly what
-- it is — and moves on (or returns nothing), as SKIP LOCKED does for rows. Each rule is re-checked
-- in a statement that starts after the lock is held, so it sees every claim committed before.
-- The rows belong to one queue each (made by the first claim that needs one, deleted with the
-- queue): the queue's own row (max_in_flight) and 256 partition slots (hashtext(partition_key) &
-- 255; a collision only makes a claimer skip a partition for one claim transaction). While the
-- claim that makes them has not ended, the other claims of the queue that need a slot find it
-- taken (once per queue: see jobbuf.make_claim_locks). Only the extension's owner can
-- lock them (row locks need UPDATE on the table, which nobody is granted), and a consumer takes
-- them only through claims of a queue it may claim, so whatever it holds (an open transaction
-- that claimed many partitions) blocks claims of that queue alone: never another queue, never
-- the worker's group delivery (jobbuf_claim refuses the queues the worker delivers). A claim of
-- one partition locks its slot only once it saw a ready job there and no group in flight, so
-- claims of partitions that are empty or made up hold nothing. The common claim (no
-- max_in_flight, jobs without partition key) locks no slot at all.

-- The claim slots of each queue: slot -1 is the queue's own (max_in_flight), slots 0-255 its
-- partitions'. Part of the extension, not dumped. A queue's slots are made by the first claim
-- that needs one (jobbuf.try_claim_lock): a queue that is never claimed, or claimed without
-- max_in_flight and partitions, has none, and a database restored in any order (pg_restore -j)
-- makes them again when its claims need them.
CREATE TABLE jobbuf.claim_locks (
    queue text NOT NULL REFERENCES jobbuf.queues (name) ON DELETE CASCADE,
    slot  integer NOT NULL,
    PRIMARY KEY (queue, slot),
    CONSTRAINT claim_locks_slot_range CHECK (slot >= -1 AND slot < 256)
);
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
CREATE FUNCTION jobbuf.try_claim_lock(queue_name text, part text)
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
