-- Drops the database the suites ran in (its drain worker steps aside), so that make installcheck
-- leaves no database, no worker and no setting behind on a real server.
SELECT current_database() AS regress_db \gset
\c template1
DROP DATABASE :"regress_db";
SELECT count(*) AS regress_databases_left FROM pg_database WHERE datname = :'regress_db';
