"""The SQL that reads what holds back the cleanup of dead rows, per database (db/horizon.py runs it).

PostgreSQL: one statement for the sessions, prepared transactions and replication slots,
one for our tables' dead rows. MariaDB/MySQL: one for InnoDB's transactions, one for the
history list length.
"""

#: Open transactions read, the oldest first.
MAX_HOLDERS = 5
#: Characters kept of the first line of a transaction's statement.
QUERY_CHARS = 200

# The sessions of this database with a snapshot or a transaction id, the oldest horizon first
# (greatest(age(xid), age(xmin)): what pins row versions, not when the transaction began: a
# READ COMMITTED transaction holds a snapshot only while a statement runs). Sessions this
# role may not see (no pg_read_all_stats) have no start (NULL) and a placeholder query, but
# their xmin, user and database are shown to every role. Walsenders have no database
# (datid NULL) and hold every database's rows with hot_standby_feedback. Autovacuum and
# the server's own processes have no user (usesysid NULL, for every role; backend_type
# reads NULL without pg_read_all_stats); parallel workers share their leader's snapshot.
POSTGRESQL_HOLDERS = f"""
(SELECT CASE WHEN datid IS NULL THEN 'walsender' ELSE 'session' END, pid, application_name,
        usename, host(client_addr), state, EXTRACT(EPOCH FROM clock_timestamp() - xact_start)::float8,
        query, '', greatest(age(backend_xid), age(backend_xmin))
   FROM pg_stat_activity
  WHERE (datname = current_database() OR datid IS NULL) AND pid <> pg_backend_pid()
    AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
    AND usesysid IS NOT NULL AND (leader_pid IS NULL OR backend_xid IS NOT NULL)
  ORDER BY 10 DESC, xact_start LIMIT {MAX_HOLDERS})
UNION ALL
(SELECT 'prepared', NULL, '', owner, '', '', EXTRACT(EPOCH FROM clock_timestamp() - prepared)::float8,
        '', gid, age(transaction)
   FROM pg_prepared_xacts WHERE database = current_database() ORDER BY 10 DESC LIMIT {MAX_HOLDERS})
UNION ALL
(SELECT CASE WHEN xmin IS NULL THEN 'catalog slot' ELSE 'replication slot' END, active_pid, '', '', '',
        CASE WHEN active THEN 'active' ELSE 'inactive' END, NULL, '', slot_name,
        coalesce(age(xmin), age(catalog_xmin))
   FROM pg_replication_slots WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
  ORDER BY xmin IS NULL, 10 DESC LIMIT {MAX_HOLDERS})
"""
# The last column: whether autovacuum may visit the table (on for the server, not off for it).
POSTGRESQL_TABLES = r"""
SELECT s.relname, s.n_live_tup, s.n_dead_tup, s.last_autovacuum, s.autovacuum_count,
       current_setting('autovacuum') = 'on' AND NOT EXISTS (
           SELECT 1 FROM unnest(c.reloptions) AS o WHERE o ~* '^autovacuum_enabled=(false|off|no|n|f|0)$')
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
 WHERE s.relname LIKE 'django\_dbjobs\_%%' AND s.schemaname = ANY(current_schemas(false)) ORDER BY s.relname
"""
# Every database's transactions: InnoDB's purge waits for the oldest read view of the server.
# A READ COMMITTED transaction (Django's level) holds one only while a statement runs, so it
# counts only then, for as long as the statement has run (PROCESSLIST's TIME); REPEATABLE
# READ and SERIALIZABLE keep theirs from their first read, for the transaction's age.
# INNODB_TRX is a copy InnoDB refreshes at most every 0.1 s: a transaction just ended may linger.
MYSQL_HOLDERS = f"""
SELECT 'session', t.trx_mysql_thread_id, '', p.USER, p.HOST,
       CONCAT_WS(', ', CONCAT('db ', p.DB), p.COMMAND, NULLIF(p.STATE, ''), t.trx_isolation_level),
       IF(t.trx_isolation_level IN ('READ COMMITTED', 'READ UNCOMMITTED'), p.TIME,
          TIMESTAMPDIFF(SECOND, t.trx_started, NOW())) AS held,
       LEFT(COALESCE(t.trx_query, p.INFO, ''), 2000), '', NULL
  FROM information_schema.INNODB_TRX t
  LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
 WHERE t.trx_mysql_thread_id <> CONNECTION_ID()
   AND (t.trx_isolation_level NOT IN ('READ COMMITTED', 'READ UNCOMMITTED')
        OR p.COMMAND IN ('Query', 'Execute', 'Fetch'))
 ORDER BY held DESC LIMIT {MAX_HOLDERS}
"""
# MariaDB counts the history list in a status variable, always; MySQL 8 only in a metric
# that may be disabled (innodb_monitor_disable), whose COUNT then stays at its last value.
MARIADB_HISTORY = "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'"
MYSQL_HISTORY = """
SELECT 'trx_rseg_history_len', `COUNT` FROM information_schema.INNODB_METRICS
 WHERE NAME = 'trx_rseg_history_len' AND STATUS = 'enabled'
"""
