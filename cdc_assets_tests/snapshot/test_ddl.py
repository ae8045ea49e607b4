"""DDL text -> schema changes (sqlglot, MySQL dialect)."""

from __future__ import annotations

import pytest

from cdc_assets.snapshot.ddl.parse import (
    AddColumn, ChangeColumn, ColumnSpec, CreateDatabase, CreateTable, CreateTableLike, DropColumn, DropDatabase,
    DropTable,
    RenameTable, TruncateTable, Unparsed, parse_ddl,
)
from cdc_assets.snapshot.ddl.rewrite import changes_rows_or_names


@pytest.mark.parametrize("sql, expected", [
    ("CREATE TABLE `d`.`t` (id INT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(20) DEFAULT 'x', "
     "amt DECIMAL(10,2), b BIT(3) DEFAULT b'101', ok BOOL, big BIGINT UNSIGNED, dflt DECIMAL)",
     [CreateTable(("d", "t"), (ColumnSpec("id", "int unsigned", "0"), ColumnSpec("name", "varchar(20)", "x"),
                               ColumnSpec("amt", "decimal(10,2)"), ColumnSpec("b", "bit(3)", "5"),
                               ColumnSpec("ok", "tinyint(1)"), ColumnSpec("big", "bigint unsigned"),
                               ColumnSpec("dflt", "decimal(10,0)")), ("id",))]),
    ("CREATE TABLE IF NOT EXISTS t2 (a BIGINT, b TEXT, PRIMARY KEY (a, `b`(10))) ENGINE=InnoDB",
     [CreateTable(("db", "t2"), (ColumnSpec("a", "bigint"), ColumnSpec("b", "text")), ("a", "b"), True)]),
    ("ALTER TABLE t ADD COLUMN c INT NOT NULL, ADD e ENUM('a','b') NOT NULL AFTER c, ADD f INT DEFAULT -3 FIRST",
     [AddColumn(("db", "t"), ColumnSpec("c", "int", "0")),
      AddColumn(("db", "t"), ColumnSpec("e", "enum('a','b')", "a"), after="c"),
      AddColumn(("db", "t"), ColumnSpec("f", "int", "-3"), first=True)]),
    ("ALTER TABLE t ADD ts TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)",
     [AddColumn(("db", "t"), ColumnSpec("ts", "timestamp(3)", None, True))]),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT",  # TiDB, MariaDB: a no-op when c exists
     [AddColumn(("db", "t"), ColumnSpec("c", "int"), if_not_exists=True)]),
    ("ALTER TABLE t DROP COLUMN c, DROP d", [DropColumn(("db", "t"), "c"), DropColumn(("db", "t"), "d")]),
    ("ALTER TABLE t MODIFY COLUMN c BIGINT", [ChangeColumn(("db", "t"), "c", "c", "bigint")]),
    ("ALTER TABLE t CHANGE c d VARCHAR(3)", [ChangeColumn(("db", "t"), "c", "d", "varchar(3)")]),
    ("ALTER TABLE `x`.`t` RENAME COLUMN c TO d", [ChangeColumn(("x", "t"), "c", "d", None)]),
    ("RENAME TABLE t1 TO t2, t3 TO `c d`",
     [RenameTable(("db", "t1"), ("db", "t2")), RenameTable(("db", "t3"), ("db", "c d"))]),
    ("RENAME TABLE a.t1 TO a.t2, a.b TO `a`.`c d`",
     [RenameTable(("a", "t1"), ("a", "t2")), RenameTable(("a", "b"), ("a", "c d"))]),
    ("ALTER TABLE a.t RENAME TO a.t3", [RenameTable(("a", "t"), ("a", "t3"))]),
    ("DROP TABLE a.t, b.u", [DropTable(("a", "t")), DropTable(("b", "u"))]),
    ("ALTER TABLE t RENAME TO t3", [RenameTable(("db", "t"), ("db", "t3"))]),
    ("TRUNCATE TABLE t", [TruncateTable(("db", "t"))]),
    ("DROP TABLE IF EXISTS t, u", [DropTable(("db", "t")), DropTable(("db", "u"))]),
    ("CREATE DATABASE IF NOT EXISTS d", [CreateDatabase("d")]),
    ("DROP SCHEMA IF EXISTS d", [DropDatabase("d")]),
    # gh-ost / pt-online-schema-change: a copy of the table, altered, then swapped in by RENAME
    ("create /* gh-ost */ table `d`.`_t_gho` like `d`.`t`", [CreateTableLike(("d", "_t_gho"), ("d", "t"))]),
    ("CREATE TABLE IF NOT EXISTS t2 (LIKE o.t1)", [CreateTableLike(("db", "t2"), ("o", "t1"), True)]),
    ("rename /* gh-ost */ table `d`.`t` to `d`.`_t_del`, `d`.`_t_gho` to `d`.`t`",
     [RenameTable(("d", "t"), ("d", "_t_del")), RenameTable(("d", "_t_gho"), ("d", "t"))]),
    # MySQL's list form, which sqlglot cannot parse itself: split at the list's own commas
    ("ALTER TABLE t ADD COLUMN (c INT, d VARCHAR(3) DEFAULT 'x,(y'), ADD (e DECIMAL(10,2)), ADD `ADD` INT",
     [AddColumn(("db", "t"), ColumnSpec("c", "int")), AddColumn(("db", "t"), ColumnSpec("d", "varchar(3)", "x,(y")),
      AddColumn(("db", "t"), ColumnSpec("e", "decimal(10,2)")), AddColumn(("db", "t"), ColumnSpec("ADD", "int"))]),
    ("ALTER TABLE t ADD c INT COMMENT 'ADD (x, y)'", [AddColumn(("db", "t"), ColumnSpec("c", "int"))]),
    # TiDB's own words change no column, type or key: set aside for the parser
    ("CREATE TABLE t (id BIGINT UNSIGNED NOT NULL AUTO_RANDOM(5, 54), a INT, PRIMARY KEY (id) NONCLUSTERED) "
     "AUTO_ID_CACHE = 1 PLACEMENT POLICY = p1 TTL = `c` + INTERVAL 1 DAY TTL_ENABLE = 'OFF'",
     [CreateTable(("db", "t"), (ColumnSpec("id", "bigint unsigned", "0"), ColumnSpec("a", "int")), ("id",))]),
    ("CREATE TABLE t (id BIGINT AUTO_RANDOM PRIMARY KEY CLUSTERED)",
     [CreateTable(("db", "t"), (ColumnSpec("id", "bigint"),), ("id",))]),
    ("ALTER TABLE t REMOVE TTL", []),
    ("ALTER TABLE `a b`.t PLACEMENT POLICY = DEFAULT", []),
    # ... but the same words as column names are columns
    ("CREATE TABLE t (auto_random BIGINT, clustered INT, ttl INT, placement INT, PRIMARY KEY (auto_random))",
     [CreateTable(("db", "t"), (ColumnSpec("auto_random", "bigint"), ColumnSpec("clustered", "int"),
                                ColumnSpec("ttl", "int"), ColumnSpec("placement", "int")), ("auto_random",))]),
    ("ALTER TABLE t ADD ttl INT, ADD COLUMN clustered INT",
     [AddColumn(("db", "t"), ColumnSpec("ttl", "int")), AddColumn(("db", "t"), ColumnSpec("clustered", "int"))]),
    ("ALTER TABLE t DROP auto_random, DROP b", [DropColumn(("db", "t"), "auto_random"), DropColumn(("db", "t"), "b")]),
    ("ALTER TABLE auto_random RENAME TO x", [RenameTable(("db", "auto_random"), ("db", "x"))]),
    ("ALTER TABLE t ADD (c INT -- a comment ends its line\n, d INT # and this one\n), DROP e",
     [AddColumn(("db", "t"), ColumnSpec("c", "int")), AddColumn(("db", "t"), ColumnSpec("d", "int")),
      DropColumn(("db", "t"), "e")]),
    # statements that change no table's columns or rows, which sqlglot cannot read
    ("ALTER DATABASE d CHARACTER SET utf8mb4", []),
    ("CREATE PLACEMENT POLICY p PRIMARY_REGION='r1'", []),
    ("ALTER TABLE d.t ADD PARTITION (PARTITION p3 VALUES LESS THAN (30))", []),
    ("ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION p1 VALUES LESS THAN (10))", []),
    ("ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4", []),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", []),
    ("CREATE INDEX i USING BTREE ON t (a)", []),
    # pt-online-schema-change's triggers, and other objects that are not tables
    ("CREATE DEFINER=`root`@`%` TRIGGER `pt_osc_d_t_del` AFTER DELETE ON `d`.`t` FOR EACH ROW "
     "DELETE IGNORE FROM `d`.`_t_new` WHERE `d`.`_t_new`.`id` <=> OLD.`id`", []),
    ("CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO DELETE FROM t", []),
    ("ALTER USER u IDENTIFIED BY 'x'", []),
    ("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1; CREATE TABLE trigger (a INT)",
     [CreateTable(("db", "trigger"), (ColumnSpec("a", "int"),), ())]),
    ("CREATE INDEX i ON t (a)", []),
    ("ALTER TABLE t ADD INDEX i (a), ALTER COLUMN c SET DEFAULT 3", []),
    ("", []),
    # MySQL's TRUNCATE PARTITION ALL empties the whole table
    ("ALTER TABLE t TRUNCATE PARTITION ALL", [TruncateTable(("db", "t"))]),
    ("/* c */ alter table `d`.`all` truncate partition all;", [TruncateTable(("d", "all"))]),
])
def test_parse_ddl(sql, expected):
    assert parse_ddl(sql, "db") == expected


@pytest.mark.parametrize("sql", [
    "CREATE TABLE t3 AS SELECT * FROM t2",  # columns unknown here
    "CREATE TABLE t3 (LIKE t2, c INT)",  # not MySQL
    "ALTER TABLE t ADD COLUMN (c INT, d VARCHAR(3)",  # unbalanced
    "ALTER TABLE t SOMETHING",
    "ALTER TABLE t TRUNCATE PARTITION p0",  # rows go without row events: reported, never ignored
    "ALTER TABLE t TRUNCATE PARTITION ALL, ADD COLUMN x INT",
    "ALTER TABLE t DROP PARTITION p0, p1",
    "ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t2",
    "ALTER TABLE t CHANGE x auto_random NATIONAL VARCHAR(10)",  # never a column named NATIONAL
    "CREATE TABLE archive.t2 LIKE t1",  # t1's database is the session's, which the message does not say
    # so is an unqualified name's next to a qualified one: Canal and TiCDC send the database of
    # the renamed-to table (`archive` here), not the session's
    "RENAME TABLE orders TO archive.orders_2023",
    "RENAME TABLE a.t1 TO a.t2, b TO c",
    "ALTER TABLE orders RENAME TO archive.orders_2023",
    "ALTER TABLE archive.orders RENAME TO orders_2023",
    "DROP TABLE archive.t1, t2",
    "DROP TABLE IF EXISTS t, o.u",
    "ALTER TABLE t DROP COLUMN",  # sqlglot's tree lacks the column: reported, never raised
])
def test_unparseable_ddl_is_reported_not_guessed(sql):
    [change] = parse_ddl(sql, "db")
    assert isinstance(change, Unparsed) and change.error


LONG = "x" * 300


@pytest.mark.parametrize("sql", [
    f"RENAME TABLE t TO {LONG}",
    f"ALTER TABLE t RENAME TO {LONG}",
    f"CREATE TABLE {LONG} (id INT PRIMARY KEY)",
    f"CREATE TABLE t2 LIKE {LONG}",
    f"ALTER TABLE `{'y' * 65}` ADD COLUMN c INT",
    f"DROP TABLE t, `{LONG}`",
    f"TRUNCATE `{'z' * 10_000}`",
    f"CREATE DATABASE {LONG}",
    f"DROP DATABASE `{LONG}`",
    "RENAME TABLE t TO `trailing `",
])
def test_a_statement_naming_a_table_no_mysql_could_have_is_reported_not_applied(sql):
    [change] = parse_ddl(sql, "db")
    assert isinstance(change, Unparsed) and "cannot be a MySQL identifier" in change.error


def test_a_long_but_legal_chinese_name_is_applied():
    name = "客户订单明细历史归档" * 4  # 40 characters
    assert parse_ddl(f"CREATE TABLE `{name}` (id INT PRIMARY KEY)", "shop") == [
        CreateTable(("shop", name), (ColumnSpec("id", "int"),), ("id",))]
    assert parse_ddl(f"RENAME TABLE t TO `{name}`", "shop") == [RenameTable(("shop", "t"), ("shop", name))]


@pytest.mark.parametrize("sql, changes", [
    ("ALTER TABLE t TRUNCATE PARTITION p0", True),
    ("ALTER TABLE `db`.`t` DROP PARTITION p0, p1", True),
    ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t2", True),
    ("ALTER TABLE t RENAME TO t2", True),
    ("alter table t rename t2", True),
    ("RENAME TABLE a TO b", True),
    ("DROP TABLE t", True),
    ("TRUNCATE t", True),
    ("ALTER TABLE t RENAME COLUMN a TO b", False),
    ("ALTER TABLE t RENAME INDEX i TO j, ADD COLUMN c INT", False),
    ("ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (10))", False),
    ("ALTER TABLE t DROP COLUMN `partition`", False),  # a column named partition
    ("ALTER TABLE t SOMETHING sqlglot DOES NOT KNOW", False),
    ("CREATE TABLE t3 AS SELECT * FROM t2", False),
])
def test_statements_whose_rows_or_names_a_structure_cannot_show(sql, changes):
    """What Debezium's and CloudCanal's tableChanges cannot stand in for when not applied."""
    assert changes_rows_or_names(sql) is changes
