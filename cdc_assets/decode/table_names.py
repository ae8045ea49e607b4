"""Database and table names that cannot be MySQL / TiDB identifiers: quarantined after decoding.

Names come from untrusted messages; storage copes with any name (`names.table_id`), but a
name that no MySQL or TiDB table can have is not a table: its events are quarantined as
`invalid_table_name`, the same step for every protocol. The rules are MySQL's for database
and table names (reference manual, "Schema Object Names"); TiDB checks the length, the empty
name and the trailing space the same way:

- at most 64 characters;
- not empty;
- no NUL (U+0000);
- no trailing space.

A DDL event may name no table (`CREATE DATABASE`) or no database: an empty name is "none"
there, not a bad one. The names inside a DDL statement's text are held to the same rules
when it is parsed (`ddl.parse.parse_ddl`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.contracts.schemas import DDL, REJECT_DETAIL, REJECT_REASON, ROW

INVALID_TABLE_NAME = "invalid_table_name"
MAX_NAME_CHARS = 64
SCHEMA_NAME_CHARS = 128  # schemas and tables of Debezium's schema-qualified sources


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a MySQL / TiDB database or table name, or None if it can."""
    if name == "":
        return "is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"is longer than {MAX_NAME_CHARS} characters ({len(name)})"
    if "\0" in name:
        return "contains NUL"
    if name.endswith(" "):
        return "ends with a space"
    return None


def name_problem_column(name: Column, max_chars: int = MAX_NAME_CHARS) -> Column:
    """`name_problem` as a Spark expression (null for a null name). Spark's `length` counts
    characters, as Python's `len` does."""
    return (F.when(name == "", F.lit("is empty"))
            .when(F.length(name) > max_chars,
                  F.concat(F.lit(f"is longer than {max_chars} characters ("), F.length(name).cast("string"),
                           F.lit(")")))
            .when(name.rlike(r"\x00"), F.lit("contains NUL"))
            .when(name.endswith(" "), F.lit("ends with a space")))


def _problem(kind: str) -> Column:
    """The first bad name of a row or DDL event, as `<kind> name <problem>`, else null. A
    database named `<db>.<schema>` (Debezium's PostgreSQL, SQL Server, Oracle, Db2 sources)
    may be as long as both parts, and such a source's table names may be longer (SQL Server,
    Oracle and Db2 allow 128 characters)."""
    schema_qualified = F.coalesce(F.col("database").contains("."), F.lit(False))
    longest = SCHEMA_NAME_CHARS + 1 + MAX_NAME_CHARS if kind == "database" else SCHEMA_NAME_CHARS
    problem = F.when(schema_qualified, name_problem_column(F.col(kind), longest)).otherwise(
        name_problem_column(F.col(kind)))
    none_named = (F.col("event_kind") == DDL) & (F.col(kind) == "")
    return F.when(~none_named, F.concat(F.lit(f"{kind} name "), problem))


def quarantine_invalid_table_names(decoded: DataFrame) -> DataFrame:
    """`decoded` (a decoder's output) with `invalid_table_name` rejects for the row and DDL
    events whose database or table cannot be an identifier; other rows unchanged."""
    problem = F.coalesce(_problem("database"), _problem("table"))
    failing = F.col(REJECT_REASON).isNull() & F.col("event_kind").isin(ROW, DDL) & problem.isNotNull()
    return decoded.withColumns({
        REJECT_REASON: F.when(failing, F.lit(INVALID_TABLE_NAME)).otherwise(F.col(REJECT_REASON)),
        REJECT_DETAIL: F.when(failing, problem).otherwise(F.col(REJECT_DETAIL)),
    })
