-- jobbuf: jobbuf_cluster_nodes(), the nodes of the Redis Cluster this database's jobbuf.redis_url
-- names, asked of the cluster at the call: one row per node and slot range (a replica shows its
-- master's ranges; a node without slots one row with NULL slots). For jobbuf_admin (node
-- addresses are not for every role). See docs/cluster.md.
CREATE FUNCTION jobbuf_cluster_nodes(
    OUT node text, OUT node_id text, OUT role text, OUT health text,
    OUT slot_first integer, OUT slot_last integer)
RETURNS SETOF record LANGUAGE c VOLATILE ROWS 12 AS 'MODULE_PATHNAME', 'jobbuf_cluster_nodes';
REVOKE ALL ON FUNCTION jobbuf_cluster_nodes() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jobbuf_cluster_nodes() TO jobbuf_admin;
