"""A seeded mutator over real messages: byte-level damage for every protocol, JSON-aware
damage (wrong types, huge values, deep nesting, missing fields) where the value is JSON,
and frame-aware damage for TiCDC Open Protocol batches (one event broken, framing intact).

Every mutation returns new (key, value) bytes and the name of the mutation, so a failing
property can say which kind of damage broke it.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable

Message = tuple[bytes | None, bytes | None]

HUGE_VALUES = [
    10**40, -(10**40), 2**64, 2**63, -(2**63) - 1, 1e308, -1e308, 1.5e-320,
    "9" * 400, "x" * 70_000, "\u0000", "\ud7ff\ue000\U0010ffff", "😀" * 100, True, None, [], {},
]


def _flip_bits(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"])
    return data[:i] + junk + data[i:]


def _splice_garbage(rng: random.Random, data: bytes) -> bytes:
    i, j = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[j:]


BYTE_MUTATIONS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "bit_flip": _flip_bits,
    "truncate": _truncate,
    "invalid_utf8": _invalid_utf8,
    "splice_garbage": _splice_garbage,
}


# -- JSON-aware ---------------------------------------------------------------------------
def _paths(node, prefix=()):
    """Every path to a value inside a JSON document (dict keys and list indexes)."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _replace(doc, path, value):
    if not path:
        return value
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return doc


def _delete(doc, path):
    if not path:
        return doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    del parent[path[-1]]
    return doc


def _wrong_type(value):
    if isinstance(value, bool) or value is None:
        return "1"
    if isinstance(value, (int, float)):
        return str(value) + "x"
    if isinstance(value, str):
        return [value] if len(value) % 2 else 12345
    if isinstance(value, list):
        return {"0": value[:1]}
    return "not an object"


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


_DEEP = "\u0001deep\u0001"


def mutate_json(rng: random.Random, doc) -> tuple[bytes, str]:
    """Serialized JSON with one value damaged (the document is modified in place)."""
    paths = list(_paths(doc))
    path = rng.choice(paths[1:] or paths)
    kind = rng.choice(["wrong_type", "huge_value", "deep_nesting", "missing_field", "null_value"])
    if kind == "wrong_type":
        return _dump(_replace(doc, path, _wrong_type(_get(doc, path)))), kind
    if kind == "huge_value":
        return _dump(_replace(doc, path, rng.choice(HUGE_VALUES))), kind
    if kind == "deep_nesting":
        # Built as text: nesting deeper than Python's recursion limit is the point.
        depth = rng.choice([50, 500, 5000])
        inner = _dump(_get(doc, path))
        text = _dump(_replace(doc, path, _DEEP))
        return text.replace(_dump(_DEEP), b"[" * depth + inner + b"]" * depth, 1), kind
    if kind == "missing_field":
        return _dump(_delete(doc, path)), kind
    return _dump(_replace(doc, path, None)), kind


def _dump(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")


# -- Open Protocol frames -------------------------------------------------------------------
def _frames(buf: bytes, start: int) -> list[bytes] | None:
    out, i = [], start
    while i < len(buf):
        if i + 8 > len(buf):
            return None
        (n,) = struct.unpack(">Q", buf[i:i + 8])
        if i + 8 + n > len(buf):
            return None
        out.append(buf[i + 8:i + 8 + n])
        i += 8 + n
    return out


def _join(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">Q", len(f)) + f for f in frames)


def mutate_open_protocol_event(rng: random.Random, key: bytes, value: bytes) -> tuple[Message, str] | None:
    """Break one event's JSON inside a well-framed batch (lengths rewritten to match)."""
    keys, values = _frames(key, 8), _frames(value or b"", 0)
    if not keys or values is None:
        return None
    i = rng.randrange(len(keys))
    target_is_key = rng.random() < 0.4 or i >= len(values) or not values[i]
    frames = keys if target_is_key else values
    try:
        doc = json.loads(frames[i])
        frames[i], kind = mutate_json(rng, doc)[0], "op_event_json"
    except (ValueError, RecursionError):
        frames[i], kind = _flip_bits(rng, frames[i] or b"\x00"), "op_event_bytes"
    return (key[:8] + _join(keys), _join(values)), kind


# -- one entry point ----------------------------------------------------------------------
def mutate(rng: random.Random, message: Message, protocol: str) -> tuple[Message, str]:
    """Damage one message in a way chosen at random (deterministic for a seeded rng)."""
    key, value = message
    if protocol == "open-protocol" and key and rng.random() < 0.4:
        framed = mutate_open_protocol_event(rng, key, value)
        if framed is not None:
            return framed
    if value and protocol != "dts-avro" and protocol != "open-protocol" and rng.random() < 0.5:
        try:
            doc = json.loads(value)
        except ValueError:
            doc = None
        if isinstance(doc, (dict, list)):
            damaged, kind = mutate_json(rng, doc)
            return (key, damaged), kind
    name = rng.choice(list(BYTE_MUTATIONS))
    if protocol == "open-protocol" and key and rng.random() < 0.3:
        return (BYTE_MUTATIONS[name](rng, key), value), f"key_{name}"
    if not value:
        return (key, bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))), "random_bytes"
    return (key, BYTE_MUTATIONS[name](rng, value)), name
