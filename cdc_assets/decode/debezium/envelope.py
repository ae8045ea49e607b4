"""Reading a Debezium envelope without re-reading its schema for every message.

`{"schema": ..., "payload": ...}` messages repeat the same Connect schema (two thirds of the
bytes) for every row of a table. `EnvelopeReader` parses the payload, takes the schema's exact
text and looks it up in a cache of row schemas (`RowSchema`: per column the conversion rule and
the MySQL type), so a schema is parsed and interpreted once per distinct text:

- payload first (TiCDC): the payload is parsed; everything after `"schema":` up to the final
  `}` is the schema's text. If that text is not exactly one JSON value (a duplicate key, a
  trailing field) it fails to parse and the message is read whole.
- schema first (Debezium's connector): the text must start with a recently seen schema text
  followed by `,"payload":`; otherwise the schema is parsed once and remembered.

Anything else (bare payloads, other key orders, escaped key names) is parsed whole, with the
same result: the fast path only ever skips work, never changes what is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdc_assets.decode.debezium.exact_json import EXACT_JSON, text_of
from cdc_assets.decode.debezium.field_schemas import field_facts

_WS = "[ \t\n\r]*"
_HEAD = re.compile(rf'{_WS}\{{{_WS}"(payload|schema)"{_WS}:{_WS}')
_THEN_SCHEMA = re.compile(rf'{_WS},{_WS}"schema"{_WS}:{_WS}')
_THEN_PAYLOAD = re.compile(rf'{_WS},{_WS}"payload"{_WS}:{_WS}')
_CLOSE = re.compile(rf"{_WS}\}}{_WS}\Z")
_MAX_SCHEMAS = 512  # distinct schema texts cached per Python worker
_RECENT = 16  # schema-first texts tried before parsing the schema


@dataclass(frozen=True)
class RowSchema:
    """What the envelope's `schema` says about the row images."""

    has_fields: bool  # the schema lists the row's fields (`after`, else `before`)
    bad: bool  # ... but some are unnamed, or named twice with different schemas
    rules: dict  # column -> (conversion rule, scale, MySQL type), see `field_facts`
    column_types: dict | None  # column -> MySQL type; None: type the values by their JSON kind


NO_SCHEMA = RowSchema(False, False, {}, None)


def _row_fields(schema) -> list | None:
    """`schema.fields[after|before].fields`: the row's field schemas (after first)."""
    fields = schema.get("fields") if type(schema) is dict else None
    if type(fields) is not list:
        return None
    for image in ("after", "before"):
        for s in fields:
            if type(s) is dict and s.get("field") == image:
                row = s.get("fields")
                if type(row) is list:
                    return row
                break
    return None


def row_schema(schema, binary_mode: str = "bytes") -> RowSchema:
    """`binary_mode`: the connector's `binary.handling.mode` (see `field_facts`)."""
    fields = _row_fields(schema)
    if fields is None:
        return NO_SCHEMA
    names = [text_of(f.get("field")) if type(f) is dict else None for f in fields]
    if None in names:
        return RowSchema(True, True, {}, None)
    if len(set(names)) != len(names):
        # TiCDC (pingcap/ticdc, 2025) lists a table's VIRTUAL generated columns twice, with
        # the same schema (their values are never sent): one copy is kept. Two different
        # schemas for one name leave the row's types unknown.
        first: dict[str, dict] = {}
        for n, f in zip(names, fields):
            if first.setdefault(n, f) != f:
                return RowSchema(True, True, {}, None)
        names, fields = list(first), list(first.values())
    rules = {n: field_facts(f, binary_mode) for n, f in zip(names, fields)}
    return RowSchema(True, False, rules, {n: r[2] for n, r in rules.items()})


class EnvelopeReader:
    """Parses messages into (the top-level JSON value, the row schema); one per batch function."""

    def __init__(self, binary_mode: str = "bytes") -> None:
        self._binary_mode = binary_mode
        self._schemas: dict[str, RowSchema] = {}
        self._recent: list[str] = []

    def read(self, text: str) -> tuple[object, RowSchema]:
        """(payload, row schema) of an enveloped message, else (the whole JSON value, its row
        schema). Raises ValueError / RecursionError for text that is not JSON."""
        head = _HEAD.match(text)
        if head is not None:
            try:
                split = (self._payload_first if head.group(1) == "payload" else self._schema_first)(text, head.end())
            except (ValueError, RecursionError):
                split = None
            if split is not None:
                return split
        message = EXACT_JSON.decode(text)
        if type(message) is not dict:
            return message, NO_SCHEMA
        return message.get("payload", message), row_schema(message.get("schema"), self._binary_mode)

    def _known(self, schema_text: str, schema=None) -> RowSchema:
        known = self._schemas.get(schema_text)
        if known is None:
            known = row_schema(EXACT_JSON.decode(schema_text) if schema is None else schema, self._binary_mode)
            if len(self._schemas) >= _MAX_SCHEMAS:
                self._schemas.clear()
            self._schemas[schema_text] = known
        return known

    def _payload_first(self, text: str, start: int) -> tuple[object, RowSchema] | None:
        payload, end = EXACT_JSON.raw_decode(text, start)
        if _CLOSE.match(text, end):
            return payload, NO_SCHEMA
        then = _THEN_SCHEMA.match(text, end)
        if then is None:
            return None
        rest = text[then.end():].rstrip(" \t\n\r")
        if not rest.endswith("}"):
            return None
        return payload, self._known(rest[:-1].rstrip(" \t\n\r"))

    def _schema_first(self, text: str, start: int) -> tuple[object, RowSchema] | None:
        for known in self._recent:
            if text.startswith(known, start):
                end = start + len(known)
                break
        else:
            schema, end = EXACT_JSON.raw_decode(text, start)
            known = text[start:end]
            self._known(known, schema)
            self._recent.insert(0, known)
            del self._recent[_RECENT:]
        then = _THEN_PAYLOAD.match(text, end)
        if then is None:
            return None
        payload, stop = EXACT_JSON.raw_decode(text, then.end())
        if not _CLOSE.match(text, stop):
            return None
        return payload, self._known(known)
