"""DDL text -> the schema changes it makes, parsed with sqlglot (MySQL dialect).

Text sqlglot cannot read as written is rewritten and read again (`ddl.rewrite.parseable`: TiDB's
own words such as `AUTO_RANDOM` set aside, MySQL's `ADD COLUMN (a INT, b INT)` split).

One statement can make several changes (`ALTER TABLE t ADD c INT, DROP d`, `DROP TABLE a, b`,
`RENAME TABLE a TO b, c TO d`). Statements that change no table's columns or rows (indexes,
comments, options, users, views) parse to no change. Text sqlglot cannot parse is reported
as `Unparsed`, with the parser's message; the caller counts it and carries on with the schema
learned from row images.
A statement naming a database or table that no MySQL table can have (`table_names`) is
reported the same way, not applied.

Values are canonical change-log text (see `contracts.schemas`): a column default is the text a
row image would carry, so it is typed like any other value.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass, fields

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from cdc_assets.decode.table_names import name_problem
from cdc_assets.snapshot.ddl.rewrite import changes_no_table, parseable

TableName = tuple[str, str]  # (database, table), exactly as MySQL names them


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    mysql_type: str
    default: str | None = None  # canonical text for rows that existed before the column
    default_is_commit_time: bool = False  # DEFAULT CURRENT_TIMESTAMP: filled with the DDL's commit time


@dataclass(frozen=True)
class CreateTable:
    table: TableName
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateTableLike:
    """`CREATE TABLE t LIKE s` (gh-ost and pt-online-schema-change start with one): s's columns,
    types and key, no rows."""

    table: TableName
    source: TableName
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropTable:
    table: TableName


@dataclass(frozen=True)
class TruncateTable:
    table: TableName


@dataclass(frozen=True)
class RenameTable:
    table: TableName
    new_table: TableName


@dataclass(frozen=True)
class AddColumn:
    table: TableName
    column: ColumnSpec
    first: bool = False
    after: str | None = None
    if_not_exists: bool = False  # TiDB / MariaDB: a no-op when the column exists


@dataclass(frozen=True)
class DropColumn:
    table: TableName
    name: str


@dataclass(frozen=True)
class ChangeColumn:
    """MODIFY (same name, new type), CHANGE (new name and type), RENAME COLUMN (type None)."""

    table: TableName
    old_name: str
    new_name: str
    mysql_type: str | None


@dataclass(frozen=True)
class CreateDatabase:
    database: str


@dataclass(frozen=True)
class DropDatabase:
    database: str


@dataclass(frozen=True)
class Unparsed:
    sql: str
    error: str


SchemaChange = (CreateTable | CreateTableLike | DropTable | TruncateTable | RenameTable | AddColumn | DropColumn
                | ChangeColumn | CreateDatabase | DropDatabase | Unparsed)


def parse_ddl(sql: str, default_database: str) -> list[SchemaChange]:
    """Every schema change `sql` makes; unqualified tables are in `default_database`. Never
    raises: text it cannot read is `Unparsed` (a malformed statement must not stop a window).
    Only text sqlglot cannot read as written is rewritten (`ddl.rewrite`) and read again."""
    if changes_no_table(sql):
        return []
    changes = _parse(sql, sql, default_database)
    if any(isinstance(c, Unparsed) for c in changes):
        rewritten = parseable(sql)
        if rewritten != sql:
            again = _parse(rewritten, sql, default_database)
            if not any(isinstance(c, Unparsed) for c in again):
                return again
    return changes


def _parse(text: str, sql: str, default_database: str) -> list[SchemaChange]:
    """`text` (`sql`, or `sql` rewritten) parsed; `Unparsed` records carry `sql`."""
    try:
        with _quiet_sqlglot():
            statements = [s for s in sqlglot.parse(text, read="mysql") if s is not None]
    except Exception as e:  # SqlglotError, or a shape sqlglot itself trips on
        return [Unparsed(sql, _first_line(str(e)) if isinstance(e, SqlglotError) else _error_text(e))]
    changes: list[SchemaChange] = []
    for statement in statements:
        try:
            changes.extend(_identifiers_only(_changes(statement, sql, default_database)))
        except (SqlglotError, ValueError) as e:
            changes.append(Unparsed(sql, _first_line(str(e))))
        except Exception as e:  # a parse tree without the parts a valid statement has
            changes.append(Unparsed(sql, _error_text(e)))
    return changes


def _identifiers_only(changes: list[SchemaChange]) -> list[SchemaChange]:
    """`changes`, unless one names a database or table no MySQL could have (`RENAME TABLE t TO`
    300 characters): such text did not come from MySQL, and is not applied. An empty name is
    an unknown session database, not a bad name."""
    for change in changes:
        for f in fields(change):
            value = getattr(change, f.name)
            names = value if f.name in ("table", "new_table", "source") else [value] if f.name == "database" else []
            for name in names:
                if name and (problem := name_problem(name)):
                    raise ValueError(f"names a database or table that cannot be a MySQL identifier: "
                                     f"{name[:40]!r} {problem}")
    return changes


def _error_text(e: Exception) -> str:
    return f"unreadable statement ({type(e).__name__}: {_first_line(str(e))})"


@contextmanager
def _quiet_sqlglot():
    """sqlglot logs a warning for every statement it keeps as a command (RENAME TABLE)."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "unparseable"


def _changes(s: exp.Expression, sql: str, db: str) -> list[SchemaChange]:
    if isinstance(s, exp.Create):
        kind = (s.args.get("kind") or "").upper()
        if kind in ("DATABASE", "SCHEMA"):
            return [CreateDatabase(s.this.name)]
        if kind == "TABLE":
            return [_create_table(s, db)]
        return []  # index, view, user, ...
    if isinstance(s, exp.Drop):
        kind = (s.args.get("kind") or "").upper()
        if kind in ("DATABASE", "SCHEMA"):
            return [DropDatabase(t.name or (t.args["db"].name if t.args.get("db") else ""))
                    for t in s.args.get("tables") or [s.this]]
        if kind == "TABLE":
            tables = s.args.get("tables") or [s.this]
            _one_database_rule([bool(t.args.get("db")) for t in tables], "DROP TABLE")
            return [DropTable(_name(t, db)) for t in tables]
        return []
    if isinstance(s, exp.TruncateTable):
        if s.args.get("is_database"):
            raise ValueError("TRUNCATE DATABASE is not MySQL")
        return [TruncateTable(_name(t, db)) for t in s.expressions]
    if isinstance(s, exp.Alter):
        if (s.args.get("kind") or "").upper() != "TABLE":
            return []
        return _alter_table(_name(s.this, db), s.args.get("actions") or [], bool(s.this.args.get("db")))
    if isinstance(s, exp.Command) and s.name.upper() == "RENAME":
        return _rename_tables(_command_text(s), db)
    if isinstance(s, exp.Command) and changes_no_table(f"{s.name} {_command_text(s)}"):
        return []  # one statement of several (a trigger, a user...)
    if isinstance(s, exp.Command) and s.name.upper() in ("ALTER", "CREATE", "DROP", "TRUNCATE"):
        raise ValueError(f"sqlglot could not parse this {s.name.upper()} statement")
    return []


def _command_text(s: exp.Command) -> str:
    """What follows a command's first word (sqlglot keeps it as a string or a literal)."""
    e = s.expression
    return e if isinstance(e, str) else str(e.this) if e is not None else ""


def _name(t: exp.Expression, db: str) -> TableName:
    return (t.args["db"].name if t.args.get("db") else db, t.name)


def _create_table(s: exp.Create, db: str) -> CreateTable | CreateTableLike:
    schema = s.this
    like = _like_source(s)
    if like is not None:
        target = schema.this if isinstance(schema, exp.Schema) else schema
        if target.args.get("db") and not like.args.get("db"):
            # `db` is the target's database (the message's), not the session's, where `like` is
            raise ValueError(f"CREATE TABLE ... LIKE {like.name}: the source's database is the session's, "
                             "which the message does not say")
        return CreateTableLike(_name(target, db), _name(like, db), bool(s.args.get("exists")))
    if not isinstance(schema, exp.Schema):  # CREATE TABLE ... AS SELECT: columns unknown here
        raise ValueError("CREATE TABLE without a column list (AS SELECT)")
    columns, pk = [], []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(_column(item))
            if any(isinstance(c.kind, exp.PrimaryKeyColumnConstraint) for c in item.constraints):
                pk.append(item.name)
        elif isinstance(item, exp.PrimaryKey):
            pk.extend(_key_part_name(e) for e in item.expressions)
    return CreateTable(_name(schema.this, db), tuple(columns), tuple(pk), bool(s.args.get("exists")))


def _like_source(s: exp.Create) -> exp.Table | None:
    """The table of `CREATE TABLE t LIKE s` or `CREATE TABLE t (LIKE s)`, else None."""
    properties = s.args.get("properties")
    found = [*(properties.expressions if properties is not None else []),
             *(s.this.expressions if isinstance(s.this, exp.Schema) else [])]
    likes = [p for p in found if isinstance(p, exp.LikeProperty)]
    if not likes:
        return None
    if len(likes) > 1 or isinstance(s.this, exp.Schema) and len(s.this.expressions) > 1:
        raise ValueError("CREATE TABLE ... LIKE with columns of its own")
    return likes[0].this


def _key_part_name(e: exp.Expression) -> str:
    while isinstance(e, (exp.Ordered, exp.Anonymous)) and e.this is not None and not isinstance(e.this, str):
        e = e.this
    return e.name


def _alter_table(table: TableName, actions: list[exp.Expression], table_qualified: bool) -> list[SchemaChange]:
    out: list[SchemaChange] = []
    for a in actions:
        if isinstance(a, exp.ColumnDef):
            position = a.args.get("position")
            first = position is not None and (position.args.get("position") or "").upper() == "FIRST"
            after = position.this.name if position is not None and position.this is not None else None
            out.append(AddColumn(table, _column(a), first, after, bool(a.args.get("exists"))))
        elif isinstance(a, exp.Drop) and (a.args.get("kind") or "").upper() == "COLUMN":
            out.extend(DropColumn(table, c.name) for c in a.args.get("tables") or [a.this])
        elif isinstance(a, exp.ModifyColumn):
            new = a.this
            old = a.args.get("rename_from")
            out.append(ChangeColumn(table, old.name if old is not None else new.name, new.name,
                                    _mysql_type(new.args["kind"])))
        elif isinstance(a, exp.RenameColumn):
            out.append(ChangeColumn(table, a.this.name, a.args["to"].name, None))
        elif isinstance(a, exp.AlterRename):
            _one_database_rule([table_qualified, bool(a.this.args.get("db"))], "ALTER TABLE ... RENAME")
            out.append(RenameTable(table, _name(a.this, table[0])))
        elif isinstance(a, exp.Command):  # an action sqlglot kept as text: it may change columns
            raise ValueError(f"an ALTER TABLE action sqlglot could not read: {a.sql(dialect='mysql')[:120]}")
        # indexes, constraints, defaults, options: no change to columns or rows
    return out


def _rename_tables(text: str, db: str) -> list[SchemaChange]:
    """`TABLE a TO b, c TO d` (sqlglot keeps RENAME TABLE as a command): split with its tokenizer."""
    tokens = sqlglot.tokenize(text, read="mysql")
    if not tokens or tokens[0].token_type != TokenType.TABLE:
        raise ValueError("RENAME without TABLE")
    pairs, current = [], [[]]
    for tok in tokens[1:]:
        if tok.token_type == TokenType.COMMA:
            pairs.append(current)
            current = [[]]
        elif tok.text.upper() == "TO" and len(current) == 1:
            current.append([])
        else:
            current[-1].append(tok)
    pairs.append(current)
    out: list[SchemaChange] = []
    for pair in pairs:
        if len(pair) != 2 or not pair[0] or not pair[1]:
            raise ValueError("RENAME TABLE: expected `old TO new` pairs")
        out.append(RenameTable(_token_name(pair[0], db), _token_name(pair[1], db)))
    _one_database_rule([any(t.token_type == TokenType.DOT for t in side) for pair in pairs for side in pair],
                       "RENAME TABLE")
    return out


def _one_database_rule(qualified: list[bool], statement: str) -> None:
    """A statement naming some tables with their database and some without is not read: the
    unqualified ones are in the session's database, which the message does not say (Canal and
    TiCDC send the database of the renamed-to or first table: `RENAME TABLE orders TO
    archive.orders_2023` comes with `archive`, so `orders` would be read as archive's)."""
    if any(qualified) and not all(qualified):
        raise ValueError(f"{statement} names tables with and without their database: the unqualified "
                         "ones are in the session's database, which the message does not say")


def _token_name(tokens, db: str) -> TableName:
    parts = [t.text for t in tokens if t.token_type != TokenType.DOT]
    if len(parts) == 1:
        return (db, parts[0])
    if len(parts) == 2:
        return (parts[0], parts[1])
    raise ValueError("RENAME TABLE: a name has more than two parts")


_BOOLEAN = {exp.DataType.Type.BOOLEAN}


def _mysql_type(kind: exp.DataType) -> str:
    if kind.this in _BOOLEAN:
        return "tinyint(1)"  # MySQL stores BOOL as TINYINT(1)
    text = kind.sql(dialect="mysql").lower()
    if text == "decimal" or text == "numeric":
        return "decimal(10,0)"  # MySQL's default precision; "decimal" alone means "infer" to TiCDC
    return text.replace(", ", ",")


_ZERO_DEFAULT_BASES = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric",
                       "float", "double", "bit", "year")
_EMPTY_DEFAULT_BASES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")


def _column(cd: exp.ColumnDef) -> ColumnSpec:
    mysql_type = _mysql_type(cd.args["kind"])
    default, now, not_null = None, False, False
    for c in cd.constraints:
        if isinstance(c.kind, exp.NotNullColumnConstraint) and not c.kind.args.get("allow_null"):
            not_null = True
        elif isinstance(c.kind, exp.DefaultColumnConstraint):
            value = c.kind.this
            if isinstance(value, exp.Literal):
                default = value.this
            elif isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
                default = "-" + value.this.this
            elif isinstance(value, exp.BitString):
                default = str(int(value.this or "0", 2))
            elif isinstance(value, exp.HexString):
                default = str(int(value.this or "0", 16))
            elif isinstance(value, exp.Boolean):
                default = "1" if value.this else "0"
            elif isinstance(value, (exp.CurrentTimestamp, exp.Anonymous, exp.Func)):
                now = value.sql(dialect="mysql").upper().startswith(("CURRENT_TIMESTAMP", "NOW", "LOCALTIME"))
    if default is None and not now and not_null:
        default = _implicit_default(cd.args["kind"], mysql_type)
    return ColumnSpec(cd.name, mysql_type, default, now)


def _implicit_default(kind: exp.DataType, mysql_type: str) -> str | None:
    """What MySQL puts in existing rows for a NOT NULL column added without a default."""
    base = mysql_type.split("(")[0].split()[0]
    if base in _ZERO_DEFAULT_BASES:
        return "0"
    if base in _EMPTY_DEFAULT_BASES:
        return ""
    if base == "enum" and kind.expressions:
        return kind.expressions[0].name
    if base == "set":
        return ""
    return None  # dates, times, binary, json: MySQL's zero values have no faithful Spark value
