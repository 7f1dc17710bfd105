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
