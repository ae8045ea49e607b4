"""Table definitions of the simulated upstream TiDB, and the demo schema.

Column types are MySQL type strings *with* their parameters ("decimal(12,2)"), as a DBA
writes them; encoders derive what their protocol shows (TiCDC Canal-JSON drops the
parameters, for instance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

_TYPE_RE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(unsigned)?\s*$", re.IGNORECASE | re.DOTALL)
_MEMBER_RE = re.compile(r"'((?:[^']|'')*)'")
_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_STRING_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_BINARY_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}

# Value kinds the simulator knows how to generate, print and encode.
INT, UINT, DECIMAL, STRING, DATETIME, BINARY = "int", "uint", "decimal", "string", "datetime", "binary"
# Kinds only the type-fidelity matrix uses (the workload generates none of them). Python
# values: float, datetime.date, aware datetime (TIMESTAMP: an instant), timedelta (TIME),
# int (YEAR, BIT), member name / comma-joined names (ENUM, SET), JSON text (JSON). A str
# for a DATE/DATETIME/TIMESTAMP is MySQL's zero value text ("0000-00-00 ...").
FLOAT, DATE, TIMESTAMP, TIME, YEAR, ENUM, SET, BIT, JSON = (
    "float", "date", "timestamp", "time", "year", "enum", "set", "bit", "json")
_SIMPLE_KINDS = {"float": FLOAT, "double": FLOAT, "date": DATE, "timestamp": TIMESTAMP, "time": TIME,
                 "year": YEAR, "enum": ENUM, "set": SET, "bit": BIT, "json": JSON}


@dataclass(frozen=True)
class ColumnDef:
    name: str
    mysql_type: str  # with parameters, e.g. "decimal(12,2)", "bigint unsigned"
    nullable: bool = False
    primary_key: bool = False

    @cached_property
    def _parsed(self) -> tuple[str, tuple[int, ...], bool]:
        m = _TYPE_RE.match(self.mysql_type)
        if not m:
            raise ValueError(f"cannot parse MySQL type {self.mysql_type!r}")
        base = m.group(1).lower()
        if base in ("enum", "set"):  # members, not numbers: enum('a','it''s')
            params = tuple(x.replace("''", "'") for x in _MEMBER_RE.findall(m.group(2) or ""))
        else:
            params = tuple(int(p) for p in m.group(2).split(",")) if m.group(2) else ()
        return base, params, bool(m.group(3))

    @property
    def base_type(self) -> str:
        """Type name without parameters or sign: "decimal", "bigint", "varbinary"."""
        return self._parsed[0]

    @property
    def unsigned(self) -> bool:
        return self._parsed[2]

    @property
    def params(self) -> tuple[int, ...]:
        return self._parsed[1]

    @cached_property
    def kind(self) -> str:
        base = self.base_type
        if base in _INTEGER_TYPES:
            return UINT if self.unsigned else INT
        if base == "decimal":
            return DECIMAL
        if base in _STRING_TYPES:
            return STRING
        if base == "datetime":
            return DATETIME
        if base in _BINARY_TYPES:
            return BINARY
        if base in _SIMPLE_KINDS:
            return _SIMPLE_KINDS[base]
        raise ValueError(f"the simulator does not support MySQL type {self.mysql_type!r}")

    @property
    def scale(self) -> int:
        return self.params[1] if self.kind == DECIMAL and len(self.params) > 1 else 0

    @property
    def precision(self) -> int:
        return self.params[0] if self.kind == DECIMAL and self.params else 10

    @property
    def fsp(self) -> int:
        """Fractional-second digits of DATETIME / TIMESTAMP / TIME (0..6)."""
        return self.params[0] if self.kind in (DATETIME, TIMESTAMP, TIME) and self.params else 0

    @property
    def members(self) -> tuple[str, ...]:
        """ENUM / SET members, in declaration order."""
        return self.params if self.kind in (ENUM, SET) else ()

    @property
    def bit_length(self) -> int:
        return self.params[0] if self.kind == BIT and self.params else 1

    @property
    def max_length(self) -> int | None:
        """Characters (strings) or bytes (binary) allowed, if declared."""
        return self.params[0] if self.kind in (STRING, BINARY) and self.params else None

    def ddl(self) -> str:
        return f"`{self.name}` {self.mysql_type} {'DEFAULT NULL' if self.nullable else 'NOT NULL'}"


@dataclass(frozen=True)
class TableDef:
    database: str
    table: str
    columns: tuple[ColumnDef, ...]

    @property
    def full_name(self) -> str:
        return f"{self.database}.{self.table}"

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def primary_key(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.primary_key)

    @cached_property
    def non_key_columns(self) -> tuple[ColumnDef, ...]:
        return tuple(c for c in self.columns if not c.primary_key)

    def pk_values(self, row: dict) -> tuple:
        return tuple(row[name] for name in self.primary_key)

    def create_sql(self) -> str:
        cols = ", ".join(c.ddl() for c in self.columns)
        pk = ", ".join(f"`{n}`" for n in self.primary_key)
        return f"CREATE TABLE `{self.database}`.`{self.table}` ({cols}, PRIMARY KEY ({pk}))"


def _col(name: str, mysql_type: str, *, nullable: bool = False, pk: bool = False) -> ColumnDef:
    return ColumnDef(name, mysql_type, nullable=nullable, primary_key=pk)


DEMO_TABLES: tuple[TableDef, ...] = (
    TableDef("shop", "customers", (
        _col("id", "int", pk=True),
        _col("name", "varchar(64)"),
        _col("balance", "decimal(12,2)"),
        _col("created_at", "datetime"),
        _col("note", "varchar(255)", nullable=True),
    )),
    TableDef("shop", "orders", (
        _col("order_id", "bigint unsigned", pk=True),
        _col("customer_id", "int"),
        _col("amount", "decimal(10,2)"),
        _col("status", "varchar(16)"),
        _col("payload", "varbinary(32)", nullable=True),
        _col("updated_at", "datetime"),
    )),
    TableDef("shop", "order_items", (
        _col("order_id", "bigint unsigned", pk=True),
        _col("line_no", "int", pk=True),
        _col("sku", "varchar(32)"),
        _col("quantity", "int"),
        _col("unit_price", "decimal(10,2)"),
    )),
    TableDef("inventory", "stock", (
        _col("sku", "varchar(32)", pk=True),
        _col("qty", "int"),
        _col("price", "decimal(12,4)", nullable=True),
        _col("blob_col", "varbinary(16)", nullable=True),
    )),
)
