-- tablesocket memcached front door: configuration schema.
-- Shaped like MySQL's innodb_memcache schema (scripts/innodb_memcached_config.sql in MySQL 5.6-8.2),
-- so a user migrating from MySQL's InnoDB memcached plugin can reuse their rows as they are.
-- The schema name is tablesocket_mc_config_schema (default innodb_memcache). Changes to these
-- tables take effect within a second, without a restart.
CREATE DATABASE IF NOT EXISTS innodb_memcache;
USE innodb_memcache;

-- Kept for compatibility; tablesocket always reads and writes the table (policy 'innodb_only').
CREATE TABLE IF NOT EXISTS cache_policies (
  policy_name VARCHAR(40) PRIMARY KEY,
  get_policy ENUM('innodb_only', 'cache_only', 'caching', 'disabled') NOT NULL,
  set_policy ENUM('innodb_only', 'cache_only', 'caching', 'disabled') NOT NULL,
  delete_policy ENUM('innodb_only', 'cache_only', 'caching', 'disabled') NOT NULL,
  flush_policy ENUM('innodb_only', 'cache_only', 'caching', 'disabled') NOT NULL
) ENGINE = InnoDB;

-- One row per container: a memcached key space mapped onto a table.
--   key_columns             the key column (one)
--   value_columns           one or more columns (separated by , ; | or space); their values are
--                           joined with the 'separator' option into the memcached value
--   flags                   column holding memcached flags, or '0' for none
--   cas_column              column holding the CAS value (BIGINT UNSIGNED), or NULL: then CAS is a
--                           hash of the row's content
--   expire_time_column      column holding the expiry as unix time (0 = never), or NULL
--   unique_idx_name_on_key  a unique index whose first column is the key (e.g. PRIMARY)
CREATE TABLE IF NOT EXISTS containers (
  name VARCHAR(50) NOT NULL PRIMARY KEY,
  db_schema VARCHAR(250) NOT NULL,
  db_table VARCHAR(250) NOT NULL,
  key_columns VARCHAR(250) NOT NULL,
  value_columns VARCHAR(250),
  flags VARCHAR(250) NOT NULL DEFAULT '0',
  cas_column VARCHAR(250),
  expire_time_column VARCHAR(250),
  unique_idx_name_on_key VARCHAR(250) NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS config_options (
  name VARCHAR(50) NOT NULL PRIMARY KEY,
  value VARCHAR(50)
) ENGINE = InnoDB;

INSERT IGNORE INTO cache_policies VALUES ('cache_policy', 'innodb_only', 'innodb_only', 'innodb_only', 'innodb_only');
INSERT IGNORE INTO config_options VALUES ('separator', '|'), ('table_map_delimiter', '.');

-- The 'default' container: what clients use until they switch with `get @@<container>`.
-- Binary-safe key and value (memcached items are bytes; values up to 1 MiB by default).
CREATE DATABASE IF NOT EXISTS test;
CREATE TABLE IF NOT EXISTS test.kv (
  k VARBINARY(250) NOT NULL PRIMARY KEY,
  v LONGBLOB,
  flags INT UNSIGNED NOT NULL DEFAULT 0,
  cas BIGINT UNSIGNED NOT NULL DEFAULT 0,
  exp INT UNSIGNED NOT NULL DEFAULT 0
) ENGINE = InnoDB;
INSERT IGNORE INTO containers VALUES ('default', 'test', 'kv', 'k', 'v', 'flags', 'cas', 'exp', 'PRIMARY');

-- MySQL's demo container, for clients and scripts written against MySQL's plugin.
CREATE TABLE IF NOT EXISTS test.demo_test (
  c1 VARCHAR(32) NOT NULL PRIMARY KEY,
  c2 VARCHAR(1024),
  c3 INT,
  c4 BIGINT UNSIGNED,
  c5 INT
) ENGINE = InnoDB;
INSERT IGNORE INTO containers VALUES ('aaa', 'test', 'demo_test', 'c1', 'c2', 'c3', 'c4', 'c5', 'PRIMARY');

-- Expired items are misses as soon as they expire, and are deleted when a write touches them.
-- This event removes the rest every minute (needs event_scheduler=ON; harmless otherwise).
CREATE EVENT IF NOT EXISTS innodb_memcache.purge_expired_kv
  ON SCHEDULE EVERY 1 MINUTE
  DO DELETE FROM test.kv WHERE exp <> 0 AND exp <= UNIX_TIMESTAMP();
