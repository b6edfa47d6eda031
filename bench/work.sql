CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, value REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, 'name-' || i, i * 0.5 FROM n;
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(value) FROM t WHERE name LIKE 'name-1%';
SELECT name FROM t ORDER BY value DESC LIMIT 5;
