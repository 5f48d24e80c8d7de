"""The statements and session settings the analysts' door is tested with, by what each tries.

`{table}` is a table of a feed every team reads; `{public}` and `{private}` are one of such a
feed and one of a feed that only its owner and the teams it grants read.
"""

# Each statement with the kind of statement the refusal names.
WRITES = {
    "drop-table": ("DROP TABLE {table}", "DROP TABLE"),
    "insert": ("INSERT INTO {table} SELECT * FROM {table} LIMIT 1", "INSERT INTO"),
    "delete": ("DELETE FROM {table}", "DELETE FROM"),
    "create-table": ("CREATE TABLE bronze.made_by_an_analyst (a INT) USING delta", "CREATE"),
    "alter-table": (
        "ALTER TABLE {table} SET TBLPROPERTIES ('taken_by' = 'marketing')",
        "ALTER TABLE SET TBLPROPERTIES",
    ),
    "optimize": ("OPTIMIZE {table}", "OPTIMIZE"),
    "set": ("SET spark.sql.variable.substitute=true", "SET of a value"),
    "reflect": ("SELECT reflect('java.lang.System', 'getenv', 'PATH')", "reflect"),
    "cache": ("CACHE TABLE {table}", "CACHE TABLE"),
    "write-a-directory": (
        "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/hub-analyst-out' USING text SELECT 'a'",
        "DIR",
    ),
}


# Statements that would reach the server's process, its files or its environment, each with
# what the refusal names.
ESCAPES = {
    "script-transformation": ("SELECT TRANSFORM('a') USING 'id' AS (o STRING)", "TRANSFORM"),
    "script-reading-the-environment": (
        "SELECT TRANSFORM(view_id) USING 'cat /proc/self/environ' AS (o STRING) FROM {table}",
        "TRANSFORM",
    ),
    "java-method": ("SELECT java_method('java.lang.System', 'getenv', 'PATH')", "java_method"),
    "try-reflect": ("SELECT try_reflect('java.lang.System', 'getenv', 'HOME')", "reflect"),
    "reflection-in-a-subquery": (
        "SELECT * FROM {table} WHERE url = (SELECT reflect('java.lang.System', 'getenv', 'HOME'))",
        "reflect",
    ),
    "reflection-behind-a-cte": (
        "WITH q AS (SELECT java_method('java.lang.System', 'exit', 0)) SELECT * FROM q",
        "java_method",
    ),
    "temporary-view-hiding-a-script": (
        "CREATE TEMPORARY VIEW hidden AS SELECT TRANSFORM('a') USING 'id' AS (o STRING)",
        "TRANSFORM",
    ),
    "temporary-function": (
        "CREATE TEMPORARY FUNCTION f AS 'org.apache.hadoop.hive.ql.udf.UDFReflect'",
        "CREATE FUNCTION",
    ),
    "temporary-view-over-a-file": (
        "CREATE TEMPORARY VIEW etc USING text OPTIONS (path '/etc/hostname')",
        "CREATE TEMP VIEW USING",
    ),
    "file-names-of-a-table": ("SELECT input_file_name() FROM {table}", "input_file_name"),
    "xml-entities": ("SELECT xpath('<a><b>1</b></a>', 'a/b')", "xpath"),
    "execute-immediate": (
        "EXECUTE IMMEDIATE 'SELECT reflect(\\'java.lang.System\\', \\'getenv\\', \\'PATH\\')'",
        "reflect",
    ),
}


# What analysts run every day: each must still run through the guard.
QUERIES = [
    "SELECT device, count(*), avg(duration_ms), max(url) FROM {table} GROUP BY device",
    "SELECT a.view_id FROM {table} a JOIN {table} b ON a.view_id = b.view_id "
    "WHERE a.duration_ms >= 0",
    "SELECT view_id, row_number() OVER (PARTITION BY device ORDER BY duration_ms DESC) "
    "FROM {table}",
    "WITH v AS (SELECT * FROM {table} WHERE duration_ms >= 0) "
    "SELECT count(DISTINCT user_id) FROM v",
    "SELECT upper(url), coalesce(device, 'none'), date_trunc('HOUR', _hub_timestamp), "
    "CASE WHEN duration_ms BETWEEN 0 AND 100 THEN 'short' ELSE 'long' END FROM {table} LIMIT 5",
    "SELECT device, count(*) FROM {table} GROUP BY ROLLUP(device) ORDER BY 2 DESC LIMIT 3",
    "SELECT * FROM {table} WHERE view_id IN (SELECT view_id FROM {table} LIMIT 3)",
    "DESCRIBE EXTENDED {table}",
    "DESCRIBE HISTORY {table}",
    "SHOW TABLES IN bronze",
    "SHOW DATABASES",
]


SESSION_SETTINGS = {
    "variable-substitution": ("set:hiveconf:spark.sql.variable.substitute", "true"),
    "login-provider": (
        "set:system:hive.server2.custom.authentication.class",
        "org.apache.hive.service.auth.AnonymousAuthenticationProviderImpl",
    ),
    "key-check-url": ("set:system:hub.analyst.api.url", "http://127.0.0.1:9/"),
    "a-spark-setting": ("spark.sql.runSQLOnFiles", "true"),
    "a-variable": ("set:hivevar:home", "${env:HOME}"),
    "a-schema-that-is-not-a-name": ("use:database", "bronze; DROP TABLE x"),
}


# Each way a statement could reach a restricted table's rows or facts besides a plain SELECT.
HIDDEN_READS = {
    "join": "SELECT count(*) FROM {public} p JOIN {private} r ON p.view_id = r.view_id",
    "subquery": "SELECT count(*) FROM {public} WHERE view_id IN (SELECT view_id FROM {private})",
    "cte": "WITH r AS (SELECT * FROM {private}) SELECT count(*) FROM r",
    "union": "SELECT view_id FROM {public} UNION ALL SELECT view_id FROM {private}",
    "temporary-view": "CREATE TEMPORARY VIEW hidden AS SELECT * FROM {private}",
    "time-travel": "SELECT count(*) FROM {private} VERSION AS OF 0",
    "describe": "DESCRIBE EXTENDED {private}",
    "describe-history": "DESCRIBE HISTORY {private}",
    "describe-detail": "DESCRIBE DETAIL {private}",
    "show-columns": "SHOW COLUMNS IN {private}",
    "show-properties": "SHOW TBLPROPERTIES {private}",
}
