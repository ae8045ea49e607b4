"""Canal-style column values, per message in Python (Canal-JSON and CloudCanal): binary
columns written as ISO-8859-1 text, TIMESTAMP wall clocks, ENUM / SET codes."""

from __future__ import annotations

import base64
import functools
import re
from datetime import timezone, tzinfo

from cdc_assets.contracts.schemas import ROW
from cdc_assets.decode.common.arrow_events import as_text, timestamp_to_utc
from cdc_assets.decode.common.key_option import key_values

_BINARY_TYPE_RE = re.compile(
    r"\s*((var)?binary|(tiny|medium|long)?blob|geometry|point|linestring|polygon"
    r"|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)\b"
)
# `enum('a','b')` / `set('a','b')` -> the quoted member list (official Canal only).
_MEMBERS_RE = re.compile(r"\s*(?i:enum|set)\s*\(\s*'(.*)'\s*\)\s*", re.S)
_INTEGER_RE = re.compile(r"\s*[+-]?[0-9]+\s*")


# -- per-type facts, cached: a dump has few distinct MySQL type texts -----------------------
@functools.lru_cache(maxsize=4096)
def _type_facts(mysql_type: str) -> tuple[bool, list[str] | None, bool, bool]:
    """(binary type, ENUM/SET members or None, is ENUM, is TIMESTAMP)."""
    lower = mysql_type.lower()
    m = _MEMBERS_RE.fullmatch(mysql_type)
    # MySQL's type text doubles a quote inside a member: enum('it''s').
    members = [x.replace("''", "'") for x in m.group(1).split("','")] if m and m.group(1) else None
    return (bool(_BINARY_TYPE_RE.match(lower)), members, lower.lstrip().startswith("enum"),
            lower.startswith("timestamp"))


def _facts(mysql_type) -> tuple[bool, list[str] | None, bool, bool]:
    return _type_facts(mysql_type if type(mysql_type) is str else as_text(mysql_type))


def _enum_or_set_name(v: str, members: list[str], is_enum: bool, names_written: bool) -> str | None:
    """Index (ENUM) / bit mask (SET) -> member name(s); None (the text is kept) when `v` is
    no integer, an index or mask beyond the members, or, for a producer that may write names
    (`names_written`), a member itself. Index 0 is MySQL's empty string for an invalid value."""
    if (names_written and v in members) or not _INTEGER_RE.fullmatch(v):
        return None
    number = int(v)
    if is_enum:
        return "" if number == 0 else members[number - 1] if 0 < number <= len(members) else None
    # a SET's mask is unsigned: its 64th member is bit 63 (Canal and TiCDC write a uint64)
    if number < 0 or number >> len(members):
        return None
    return ",".join(m for i, m in enumerate(members) if (number >> i) & 1)


def canonical(row: dict | None, types: dict, tz: tzinfo, names_written: bool = False) -> dict | None:
    """Binary columns: ISO-8859-1 text -> exact bytes -> base64. TIMESTAMP columns: the
    changefeed's wall clock -> UTC. ENUM/SET codes -> names: Canal and TiCDC always write
    the code, so `enum('0','1')` value `"1"` is `'0'`; `names_written` (a producer whose
    value forms are undocumented) keeps a value that is itself a member. Others unchanged."""
    if row is None:
        return None
    out = {}
    for k, v in row.items():
        t = types.get(k)
        if v is not None and t is not None:
            binary, members, is_enum, is_timestamp = _facts(t)
            if type(v) is float or not (binary or members or (is_timestamp and tz is not timezone.utc)):
                # left as parsed: the batch writes it as text, after the message is decoded
                # again with exact numbers if it is a double (`arrow_events.EventRows`)
                out[k] = v
                continue
            v = v if type(v) is str else as_text(v)
            name = _enum_or_set_name(v, members, is_enum, names_written) if members else None
            if name is not None:
                v = name
            elif binary:
                try:  # a non-Latin-1 value cannot be bytes: kept, and the event is quarantined
                    v = base64.b64encode(v.encode("latin-1")).decode("ascii")
                except UnicodeEncodeError:
                    pass
            elif is_timestamp and tz is not timezone.utc:
                v = timestamp_to_utc(v, tz)
        out[k] = v
    return out


def type_flags(types: dict, tz: tzinfo) -> tuple[bool, bool]:
    """(a column has a binary type, a column has a type `canonical` may change), for a
    message's column types: the common message (plain types only) skips `canonical`."""
    try:
        return _flags_by_types[(tz, *types.values())]
    except (KeyError, TypeError):  # TypeError: a type that is not text (not cached)
        pass
    has_binary = changes = False
    for t in types.values():
        if t is None:
            continue
        binary, members, _, is_timestamp = _facts(t)
        has_binary |= binary
        changes |= binary or members is not None or (is_timestamp and tz is not timezone.utc)
    if len(_flags_by_types) < 4096 and all(type(t) is str for t in types.values()):
        _flags_by_types[(tz, *types.values())] = has_binary, changes
    return has_binary, changes


_flags_by_types: dict[tuple, tuple[bool, bool]] = {}


def shared_types(types: dict) -> dict:
    """`types`, or an equal dict of column types seen before (texts only): a table's events
    then share one object, whose map a batch builds once (`arrow_events.shared_map_array`)."""
    key = (*types, *types.values())  # n names then n types: equal keys, equal dicts
    try:
        seen = _shared_types.get(key)
    except TypeError:  # a type that is not text (not shared)
        return types
    if seen is not None:
        return seen
    if len(_shared_types) < 4096 and all(type(t) is str for t in types.values()):
        _shared_types[key] = types
    return types


_shared_types: dict[tuple, dict] = {}


def has_non_latin1_binary(row: dict | None, types: dict) -> bool:
    for k, v in (row or {}).items():
        t = types.get(k)
        if v is not None and t is not None and _facts(t)[0] and any(ord(c) > 0xFF for c in as_text(v)):
            return True
    return False


def key_and_reject(pk_names: list | None, before: dict | None, after: dict | None, row: dict | None,
                   types: dict | None, has_binary: bool):
    """A row event's primary key values (`key_values`) and its (reason, detail): a null key,
    else binary text beyond ISO-8859-1, else none (a message's own reject comes first, once)."""
    pk_values = key_values(pk_names, before, after)
    reason = detail = None
    if None in pk_values:
        reason, detail = "null_primary_key", "a primary key column is null or absent: " + ",".join(
            n for n in pk_names if n is not None)
    elif has_binary and has_non_latin1_binary(row, types):
        reason, detail = "invalid_binary_value", "a binary column holds characters beyond ISO-8859-1"
    return pk_values, reason, detail


def row_images(op: str, row: dict | None, old: dict | None, delete_image_from_old: bool = False):
    """(before, after) of one row of a Canal-shaped DML message; `old` pairs with `row`. An
    UPDATE's `old` may hold only the changed columns, so its before image is `row` overlaid
    with `old`. A DELETE's before image is the deleted row, or with `delete_image_from_old`
    (CloudCanal's `before`) `old` when present."""
    if op == "INSERT":
        return None, row
    if op == "UPDATE":
        return ({k: (old[k] if k in old else v) for k, v in row.items()}
                if old is not None and row is not None else None), row
    if op == "DELETE":
        return (old if delete_image_from_old and old else row), None
    return None, None


def row_events(op: str, data, old_rows, types: dict | None, tz: tzinfo, flags: tuple[bool, bool], *,
               database: str | None, table: str | None, commit_ts: int | None, position: int | None,
               event_ms: int | None, pk_names: list, names_written: bool = False,
               delete_image_from_old: bool = False) -> list[tuple]:
    """One row event per element of `data` (`old_rows[i]` pairs with `data[i]`, see
    `row_images`), its values canonical and its key checked. `flags`: `type_flags` of `types`."""
    has_binary, changes = flags
    events = []
    for pos, row in enumerate(data or (None,)):
        before, after = row_images(op, row, old_rows[pos] if pos < len(old_rows) else None, delete_image_from_old)
        if changes:
            before = canonical(before, types, tz, names_written)
            after = canonical(after, types, tz, names_written)
        pk_values, reason, detail = key_and_reject(pk_names, before, after, row, types, has_binary)
        # the hot path: the event tuple in EVENT_FIELDS order, as `arrow_events.event` would build it
        events.append((pos, ROW, op, database, table, commit_ts, position, event_ms, pk_names, pk_values,
                       before, after, types, None, None, None, reason, detail))
    return events
