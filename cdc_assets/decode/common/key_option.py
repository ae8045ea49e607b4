"""The `primary-key` option: key columns for row events whose message names none.

A snapshot needs a key, and some producers send rows without one: official Canal or
RisingWave's canal-json with `pkNames: null`, Debezium with `key.converter` dropping the key,
old TiCDC Open Protocol rows without handle-key flags, DTS records without a `pk_uk_info` tag.
Their rows are quarantined as `missing_primary_key` unless this option names the key.

Syntax (docs/protocols.md): `id` or `a,b` for every table; `shop.orders:id;shop.items:order_id,line`
per `database.table` (the change log's names, matched exactly); both may be mixed, and a list
without a table is then the key of every other table. A key the message names always wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KeyOption:
    every_table: tuple[str, ...] = ()
    by_table: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.every_table or self.by_table)

    def names_for(self, database: str | None, table: str | None) -> list[str] | None:
        """The configured key of `database.table` (a new list), or None."""
        names = self.by_table.get(f"{database}.{table}", self.every_table)
        return list(names) if names else None


NO_KEYS = KeyOption()


def key_values(pk_names: list | None, before: dict | None, after: dict | None) -> list | None:
    """The key's values from the after image (a DELETE's from the before image). A key column
    set to NULL is a null key, never the old value: a configured key may name a nullable column."""
    image = (after if after is not None else before) or {}
    return None if pk_names is None else [image.get(n) for n in pk_names]


def parse_key_option(text: str | None) -> KeyOption:
    """`primary-key`'s text -> KeyOption; ValueError names what is wrong."""
    every: tuple[str, ...] = ()
    by_table: dict[str, tuple[str, ...]] = {}
    for entry in (e.strip() for e in (text or "").split(";")):
        if not entry:
            continue
        table, sep, columns = entry.rpartition(":")
        if ":" in table or "," in table:
            raise ValueError(f"primary-key: {entry!r} names several tables; separate them with ';'"
                             " (`db.t:a,b;db.u:id`)")
        names = tuple(c.strip() for c in columns.split(","))
        if not all(names):
            raise ValueError(f"primary-key: an empty column name in {entry!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"primary-key: a column named twice in {entry!r}")
        if any("=" in n for n in names):
            raise ValueError(f"primary-key: {entry!r} holds '='; a table's key is written `db.table:a,b`")
        if not sep:
            if every:
                raise ValueError(f"primary-key: two keys for every table ({','.join(every)!r} and {entry!r})")
            every = names
            continue
        table = table.strip()
        if "." not in table.strip(".") or table in by_table:
            raise ValueError(
                f"primary-key: {table!r} is not a distinct database.table (write `db.table:col1,col2`)")
        by_table[table] = names
    return KeyOption(every, by_table)
