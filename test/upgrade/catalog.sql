-- Describes everything the jobbuf extension owns, one sorted line per fact, without OIDs: two
-- databases whose outputs are equal have the same jobbuf catalog (test/upgrade/same_catalog.sh).
WITH ext AS (
    SELECT e.oid, e.extversion, e.extconfig, e.extcondition, e.extnamespace
    FROM pg_catalog.pg_extension e WHERE e.extname = 'jobbuf'
), members AS (
    SELECT d.classid, d.objid FROM pg_catalog.pg_depend d, ext
    WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext.oid AND d.deptype = 'e'
), rels AS (
    SELECT c.* FROM pg_catalog.pg_class c JOIN members m
      ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = c.oid
), cols AS (
    SELECT a.*, pg_catalog.row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS position
    FROM pg_catalog.pg_attribute a JOIN rels r ON r.oid = a.attrelid
    WHERE a.attnum > 0 AND NOT a.attisdropped
), procs AS (
    SELECT p.* FROM pg_catalog.pg_proc p JOIN members m
      ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = p.oid
), facts (fact) AS (
    SELECT pg_catalog.format('extension version=%s schema=%s config=%s conditions=%s comment=%s',
               ext.extversion, ext.extnamespace::pg_catalog.regnamespace,
               (SELECT pg_catalog.array_agg(c::pg_catalog.regclass::text ORDER BY c::pg_catalog.regclass::text)
                FROM pg_catalog.unnest(ext.extconfig) c),
               ext.extcondition, pg_catalog.obj_description(ext.oid, 'pg_extension'))
    FROM ext
  UNION ALL
    SELECT 'member ' || pg_catalog.pg_describe_object(m.classid, m.objid, 0) FROM members m
  UNION ALL
    SELECT pg_catalog.format('schema %s owner=%s acl=%s comment=%s', n.nspname,
               n.nspowner::pg_catalog.regrole, n.nspacl, pg_catalog.obj_description(n.oid, 'pg_namespace'))
    FROM pg_catalog.pg_namespace n JOIN members m
      ON m.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND m.objid = n.oid
  UNION ALL
    SELECT pg_catalog.format('relation %s kind=%s persistence=%s options=%s acl=%s rowsecurity=%s replica_identity=%s comment=%s',
               r.oid::pg_catalog.regclass, r.relkind, r.relpersistence, r.reloptions, r.relacl,
               r.relrowsecurity, r.relreplident, pg_catalog.obj_description(r.oid, 'pg_class'))
    FROM rels r
  UNION ALL
    SELECT pg_catalog.format('column %s.%s position=%s type=%s notnull=%s default=%s identity=%s options=%s acl=%s collation=%s comment=%s',
               c.attrelid::pg_catalog.regclass, c.attname, c.position,
               pg_catalog.format_type(c.atttypid, c.atttypmod), c.attnotnull,
               pg_catalog.pg_get_expr(d.adbin, d.adrelid), c.attidentity,
               -- (some builds keep a per-database attribute version in attoptions: not a difference)
               (SELECT pg_catalog.array_agg(o) FROM pg_catalog.unnest(c.attoptions) o
                WHERE o NOT LIKE 'pg\_attver=%'), c.attacl,
               c.attcollation, pg_catalog.col_description(c.attrelid, c.attnum))
    FROM cols c LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.attrelid AND d.adnum = c.attnum
  UNION ALL
    SELECT pg_catalog.format('index %s', pg_catalog.pg_get_indexdef(i.indexrelid))
    FROM pg_catalog.pg_index i JOIN rels r ON r.oid = i.indrelid
  UNION ALL
    SELECT pg_catalog.format('constraint %s on %s: %s deferrable=%s validated=%s comment=%s', k.conname,
               k.conrelid::pg_catalog.regclass, pg_catalog.pg_get_constraintdef(k.oid), k.condeferrable,
               k.convalidated, pg_catalog.obj_description(k.oid, 'pg_constraint'))
    FROM pg_catalog.pg_constraint k JOIN rels r ON r.oid = k.conrelid
  UNION ALL
    SELECT pg_catalog.format('trigger %s enabled=%s internal=%s comment=%s',
               CASE WHEN t.tgisinternal THEN pg_catalog.format('(constraint %s) on %s', k.conname, t.tgrelid::pg_catalog.regclass)
                    ELSE pg_catalog.pg_get_triggerdef(t.oid) END,
               t.tgenabled, t.tgisinternal, pg_catalog.obj_description(t.oid, 'pg_trigger'))
    FROM pg_catalog.pg_trigger t JOIN rels r ON r.oid = t.tgrelid
    LEFT JOIN pg_catalog.pg_constraint k ON k.oid = t.tgconstraint
  UNION ALL
    SELECT pg_catalog.format('sequence %s start=%s increment=%s min=%s max=%s cycle=%s owned_by=%s',
               s.seqrelid::pg_catalog.regclass, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcycle,
               (SELECT pg_catalog.pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid)
                FROM pg_catalog.pg_depend d
                WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = s.seqrelid
                  AND d.deptype IN ('a', 'i')))
    FROM pg_catalog.pg_sequence s JOIN rels r ON r.oid = s.seqrelid
  UNION ALL
    SELECT pg_catalog.format('policy %s on %s: %s', p.polname, p.polrelid::pg_catalog.regclass,
               pg_catalog.pg_get_expr(p.polqual, p.polrelid))
    FROM pg_catalog.pg_policy p JOIN rels r ON r.oid = p.polrelid
  UNION ALL
    SELECT pg_catalog.format('rule %s', pg_catalog.pg_get_ruledef(w.oid))
    FROM pg_catalog.pg_rewrite w JOIN rels r ON r.oid = w.ev_class WHERE w.rulename <> '_RETURN'
  UNION ALL
    SELECT pg_catalog.format('function %s owner=%s acl=%s comment=%s definition=%s',
               p.oid::pg_catalog.regprocedure, p.proowner::pg_catalog.regrole, p.proacl,
               pg_catalog.obj_description(p.oid, 'pg_proc'),
               CASE WHEN p.prokind IN ('f', 'p', 'w') THEN pg_catalog.pg_get_functiondef(p.oid) END)
    FROM procs p
  UNION ALL
    SELECT pg_catalog.format('type %s', t.oid::pg_catalog.regtype)
    FROM pg_catalog.pg_type t JOIN members m
      ON m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND m.objid = t.oid
  UNION ALL
    SELECT pg_catalog.format('default acl %s', d.defaclacl)
    FROM pg_catalog.pg_default_acl d, ext WHERE d.defaclnamespace = ext.extnamespace
)
SELECT f.fact FROM facts f ORDER BY f.fact COLLATE "C";
