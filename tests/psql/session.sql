\dt
\d plain_events
\d bucketed_events
\d+ bucketed_events
\dn
\l
SELECT obj_description('bucketed_events'::regclass, 'pg_class') AS table_comment;
\x on
SELECT id, name, price, created FROM plain_events ORDER BY id;
\x off
\timing on
SELECT kind, count(*) AS events FROM bucketed_events GROUP BY kind ORDER BY kind;
\timing off
SELECT * FROM no_such_table;
SELECT 'still connected' AS after_error;
