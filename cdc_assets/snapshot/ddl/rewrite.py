"""DDL text sqlglot cannot read as written: rewritten with the same schema changes (TiDB's own
words set aside, MySQL's `ADD COLUMN (a, b)` list form split, `TRUNCATE PARTITION ALL` as the
TRUNCATE TABLE it is), or known to change no table.
Works on sqlglot's tokens, so strings, quoted names, comments and nesting are respected."""

from __future__ import annotations

import sqlglot
from sqlglot.errors import SqlglotError
from sqlglot.parser import Parser
from sqlglot.tokens import TokenType


#: Statements that change no table's columns or rows: a database's options, placement policies,
#: indexes; and partition layout below (not DROP / TRUNCATE / EXCHANGE PARTITION, which remove
#: or swap rows).
_NO_TABLE_CHANGE = (
    ("ALTER", "DATABASE"), ("ALTER", "SCHEMA"),
    ("CREATE", "PLACEMENT", "POLICY"), ("ALTER", "PLACEMENT", "POLICY"), ("DROP", "PLACEMENT", "POLICY"),
    ("CREATE", "INDEX"), ("CREATE", "UNIQUE", "INDEX"), ("CREATE", "FULLTEXT", "INDEX"), ("CREATE", "SPATIAL", "INDEX"),
)
_LAYOUT_ONLY = frozenset({"ADD", "COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR"})
#: What CREATE / ALTER / DROP may name: anything but a table or a database changes no table
#: (pt-online-schema-change's triggers, events, routines, users).
_OBJECT_KINDS = frozenset({"TABLE", "DATABASE", "SCHEMA", "TRIGGER", "EVENT", "PROCEDURE", "FUNCTION", "USER",
                           "ROLE", "VIEW", "SERVER", "TABLESPACE", "SEQUENCE", "RESOURCE"})
#: A single ALTER TABLE action that changes no column, type, key or row.
_NO_COLUMN_CHANGE = (["CONVERT", "TO"], ["DISABLE", "KEYS"], ["ENABLE", "KEYS"], ["ADD", "CHECK"])


def changes_no_table(sql: str) -> bool:
    """One statement that changes no table's columns or rows, known by its first words: many of
    them sqlglot cannot read (`CREATE INDEX ... USING BTREE`, `CREATE TRIGGER`, `ALTER TABLE t
    CONVERT TO CHARACTER SET ...`)."""
    tokens = _statement_tokens(sql)
    if tokens is None:
        return False
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        return False  # several statements: each is read on its own
    words = [t.text.upper() for t in tokens]
    if any(tuple(words[:len(p)]) == p for p in _NO_TABLE_CHANGE):
        return True
    if words[:1] in (["CREATE"], ["ALTER"], ["DROP"]):  # the object, after DEFINER = ..., OR REPLACE, ...
        kind = next((w for w in words[1:12] if w in _OBJECT_KINDS), None)
        if kind is not None and kind not in ("TABLE", "DATABASE", "SCHEMA"):
            return True
    # ALTER TABLE [db.]t [<ADD|COALESCE|...> PARTITION ..., PARTITION BY ..., REMOVE PARTITIONING]
    if words[:2] != ["ALTER", "TABLE"] or any(t.token_type == TokenType.COMMA for t in _top_level(tokens)):
        return False
    rest = words[_after_table_name(tokens):]
    return (not rest  # nothing left once TiDB's options are set aside (`ALTER TABLE t REMOVE TTL`)
            or rest[:2] in (["PARTITION", "BY"], ["REMOVE", "PARTITIONING"], *_NO_COLUMN_CHANGE)
            or rest[:1] == ["PARTITION BY"]
            or len(rest) > 1 and rest[0] in _LAYOUT_ONLY and rest[1] == "PARTITION")


def changes_rows_or_names(sql: str) -> bool:
    """Whether a statement may remove or swap rows, or rename or drop a table: what a protocol's
    description of the table after it (Debezium's and CloudCanal's `tableChanges`) cannot show,
    so a statement of this kind that is not applied is reported even with one. By its words:
    RENAME / DROP / TRUNCATE, or an ALTER TABLE that renames the table or drops, truncates or
    exchanges partitions. Text it cannot tokenize counts as such a statement."""
    tokens = _statement_tokens(sql)
    if tokens is None:
        return True
    words = [t.text.upper() if t.token_type != TokenType.IDENTIFIER else "" for t in tokens]
    if words[:1] in (["RENAME"], ["DROP"], ["TRUNCATE"]):
        return True
    if words[:2] != ["ALTER", "TABLE"]:
        return False
    return any(b == "PARTITION" and a in _ROW_PARTITION_ACTIONS or a == "RENAME" and b not in _RENAMED_PARTS
               for a, b in zip(words, words[1:] + [""]))


_ROW_PARTITION_ACTIONS = frozenset({"DROP", "TRUNCATE", "EXCHANGE"})
_RENAMED_PARTS = frozenset({"COLUMN", "INDEX", "KEY"})  # `RENAME COLUMN a TO b` keeps the table's name


def _statement_tokens(sql: str) -> list | None:
    """sqlglot's tokens of `sql` without its trailing semicolons; None if it cannot tokenize."""
    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except SqlglotError:
        return None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    return tokens


def _after_table_name(tokens) -> int:
    """The index after `ALTER TABLE [db.]t`."""
    return 5 if len(tokens) > 4 and tokens[3].token_type == TokenType.DOT else 3


def _nesting(token) -> int:
    """How a token changes the parenthesis depth: +1, -1 or 0."""
    return (token.token_type == TokenType.L_PAREN) - (token.token_type == TokenType.R_PAREN)


def _top_level(tokens) -> list:
    depth, out = 0, []
    for t in tokens:
        depth += _nesting(t)
        if depth == 0:
            out.append(t)
    return out


def parseable(sql: str) -> str:
    """`sql` as sqlglot can parse it, with the same schema changes."""
    return _split_add_column_lists(_without_tidb_extensions(_truncating_all_partitions(sql)))


def _truncating_all_partitions(sql: str) -> str:
    """MySQL's `ALTER TABLE [db.]t TRUNCATE PARTITION ALL` empties the table: `TRUNCATE TABLE`."""
    tokens = _statement_tokens(sql) if "ALL" in sql.upper() else None
    if tokens is None:
        return sql
    after_name = _after_table_name(tokens)
    words = [t.text.upper() for t in tokens]
    if words[:2] != ["ALTER", "TABLE"] or words[after_name:] != ["TRUNCATE", "PARTITION", "ALL"]:
        return sql
    return "TRUNCATE TABLE " + sql[tokens[2].start:tokens[after_name - 1].end + 1]


#: TiDB's own words, which change no column, type or key (as TiDB writes them in `/*T![...] */`
#: comments in SHOW CREATE TABLE): dropped with their arguments before parsing.
_TIDB_WORDS = frozenset({"AUTO_RANDOM", "CLUSTERED", "NONCLUSTERED", "AUTO_ID_CACHE", "PLACEMENT"})
_TIDB_TTL = frozenset({"TTL", "TTL_ENABLE", "TTL_JOB_INTERVAL"})


def _without_tidb_extensions(sql: str) -> str:
    """Drop `AUTO_RANDOM[(n[, m])]`, `[NON]CLUSTERED`, `AUTO_ID_CACHE [=] n`, `PLACEMENT POLICY
    [=] p`, `REMOVE TTL` and the TTL table options (to the statement's end: they come last)."""
    upper = sql.upper()
    if not any(w in upper for w in (*_TIDB_WORDS, "TTL")):
        return sql
    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except SqlglotError:
        return sql
    word = lambda i: tokens[i].text.upper() if 0 <= i < len(tokens) and tokens[i].token_type == TokenType.VAR else ""  # noqa: E731
    kind = lambda i: tokens[i].token_type if 0 <= i < len(tokens) else None  # noqa: E731
    drop: list[tuple[int, int]] = []  # token index ranges [from, to)
    depth, i = 0, 0
    while i < len(tokens):
        depth += _nesting(tokens[i])
        w, end = word(i), i + 1
        if w == "AUTO_RANDOM" and _modifies_a_column(tokens, i):
            end = _after_group(tokens, end) if kind(end) == TokenType.L_PAREN else end
        elif w in ("CLUSTERED", "NONCLUSTERED") and kind(i - 1) in (TokenType.PRIMARY_KEY, TokenType.R_PAREN):
            pass
        elif w == "PLACEMENT" and word(i + 1) == "POLICY":
            end += 1 + (kind(end + 1) == TokenType.EQ) + 1  # POLICY [=] name
        elif depth == 0 and (w == "AUTO_ID_CACHE" or w in _TIDB_TTL) and kind(end) in (TokenType.EQ, TokenType.NUMBER):
            stop = TokenType.SEMICOLON if w in _TIDB_TTL else None  # TTL's expression: to the statement's end
            end = end + (kind(end) == TokenType.EQ) + 1
            while stop is not None and end < len(tokens) and kind(end) != stop:
                end += 1
        elif depth == 0 and w == "REMOVE" and word(i + 1) == "TTL":
            end += 1
        else:
            i += 1
            continue
        drop.append((i, min(end, len(tokens))))
        i = end
    if not drop:
        return sql
    out, copied = [], 0
    for first, stop in drop:
        out.append(sql[copied:tokens[first].start])
        copied = tokens[stop - 1].end + 1
    return "".join(out) + sql[copied:]


_BEFORE_A_NAME = frozenset({"ADD", "CHANGE", "MODIFY", "DROP", "AFTER", "TO", "TABLE", "INDEX", "KEY",
                            "REFERENCES", "ALTER", "CONSTRAINT", "RENAME", "ON", "FROM", "LIKE"})


def _modifies_a_column(tokens, i: int) -> bool:
    """AUTO_RANDOM at tokens[i] follows a column's type (`id BIGINT AUTO_RANDOM(5)`), and is
    not itself a column's name (`ADD COLUMN auto_random INT`, `PRIMARY KEY (auto_random)`)."""
    before = tokens[i - 1] if i > 0 else None
    if before is None or before.token_type in (TokenType.L_PAREN, TokenType.COMMA, TokenType.COLUMN, TokenType.DOT):
        return False
    if before.text.upper() in _BEFORE_A_NAME:  # whatever its token type
        return False
    if "CHANGE" in (tokens[i - 2].text.upper() if i >= 2 else "", tokens[i - 3].text.upper() if i >= 3 else ""):
        return False  # CHANGE [COLUMN] old auto_random <type>: the new name
    after = _after_group(tokens, i + 1) if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN \
        else i + 1
    return after >= len(tokens) or tokens[after].token_type not in Parser.TYPE_TOKENS


def _after_group(tokens, i: int) -> int:
    """The index after the parenthesised group that starts at tokens[i]."""
    depth = 0
    for k in range(i, len(tokens)):
        depth += _nesting(tokens[k])
        if depth == 0:
            return k + 1
    return len(tokens)


def _split_add_column_lists(sql: str) -> str:
    """MySQL's `ADD [COLUMN] (a INT, b INT)`, which sqlglot cannot parse, written as
    `ADD COLUMN a INT, ADD COLUMN b INT` (split at the list's own commas, with its tokenizer)."""
    if "(" not in sql or "add" not in sql.lower():
        return sql
    try:
        tokens = sqlglot.tokenize(sql, read="mysql")
    except SqlglotError:
        return sql
    out, copied, i = [], 0, 0
    while i < len(tokens):
        j = i + 1 + (i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.COLUMN)
        if not (tokens[i].token_type == TokenType.VAR and tokens[i].text.upper() == "ADD"
                and j < len(tokens) and tokens[j].token_type == TokenType.L_PAREN):
            i += 1
            continue
        depth, start, parts = 0, tokens[j].end + 1, []
        for k in range(j, len(tokens)):
            kind = tokens[k].token_type
            depth += _nesting(tokens[k])
            if depth == 0 or kind == TokenType.COMMA and depth == 1:
                parts.append(sql[start:tokens[k].start].strip())
                start = tokens[k].end + 1
            if depth == 0:
                break
        else:
            return sql  # unbalanced: left for the parser to report
        # a part may end in a `--` or `#` comment: each part ends its line
        out += [sql[copied:tokens[i].start], "\n, ".join(f"ADD COLUMN {p}" for p in parts) + "\n"]
        copied, i = tokens[k].end + 1, k + 1
    return "".join(out) + sql[copied:]
