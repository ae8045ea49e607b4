"""Issue 42.5: a 20 MB message, as kcat writes it, keeps its bytes and gets its true reason.

Spark's JSON reader (Jackson) refused a string of more than 20,000,000 characters: the kcat
layout landed such a payload as null, so a Canal-JSON message became `empty_message` and an
Open Protocol one `unpaired_key_value`, both without their bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from pyspark.sql import functions as F

from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.common.arrow_events import KEPT_PREFIX_BYTES
from cdc_assets.landing.layouts import read_dump
from cdc_assets.simulator.writers import kcat_json_string

pytestmark = pytest.mark.slow

TSO = 463_000_000_000_000_000
BIG = 20 << 20  # 20 MiB: above the default max-message-bytes (16 MiB) and Jackson's string limit


def canal_insert(text: str) -> bytes:
    """TiCDC's Canal-JSON INSERT of a row whose LONGTEXT holds `text`."""
    return json.dumps({"id": 0, "database": "shop", "table": "docs", "pkNames": ["id"], "isDdl": False,
                       "type": "INSERT", "es": 1_767_225_600_000, "ts": 1_767_225_600_001, "sql": "",
                       "sqlType": {"id": 4, "body": 2005}, "mysqlType": {"id": "int", "body": "longtext"},
                       "data": [{"id": "1", "body": text}], "old": None, "_tidb": {"commitTs": TSO}}).encode()


def open_protocol_insert(text: str) -> tuple[bytes, bytes]:
    """TiCDC's Open Protocol batch of one INSERT (key frames after the version, value frames)."""
    k = json.dumps({"ts": TSO, "scm": "shop", "tbl": "docs", "t": 1}).encode()
    v = json.dumps({"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}, "body": {"t": 252, "f": 0, "v": text}}}).encode()
    return (1).to_bytes(8, "big") + len(k).to_bytes(8, "big") + k, len(v).to_bytes(8, "big") + v


def kcat_file(path, messages: list[tuple[bytes | None, bytes]]):
    """The lines `kcat -C -J` prints (yajl escapes `"`, `\\` and control bytes only)."""
    lines = [b'{"topic":"t","partition":0,"offset":%d,"tstype":"create","ts":1767225600000,"broker":1,'
             b'"key":%s,"payload":%s}\n' % (i, kcat_json_string(k), kcat_json_string(v))
             for i, (k, v) in enumerate(messages)]
    path.write_bytes(b"".join(lines))
    return path


def quarantined(decoder, raw) -> list[dict]:
    rows = decoder.decode(raw).where(F.col(REJECT_REASON).isNotNull()).orderBy("kafka_offset").collect()
    return [r.asDict() for r in rows]


@pytest.fixture(scope="module")
def landed(spark, tmp_path_factory):
    """A 20 MiB Canal-JSON message and one cut short; an Open Protocol pair likewise: landed by kcat."""
    root = tmp_path_factory.mktemp("big")
    text = "ü" + "x" * BIG  # the real message: one row of a 20 MiB document
    canal = canal_insert(text)
    op_key, op_value = open_protocol_insert(base64.b64encode(text.encode()).decode())
    files = [kcat_file(root / "canal.jsonl", [(None, canal), (None, canal[:-7])]),
             kcat_file(root / "op.jsonl", [(op_key, op_value), (op_key, op_value[:-7])])]
    raw = read_dump(spark, files, "kcat-jsonl", root).persist()
    yield raw, canal, (op_key, op_value)
    raw.unpersist()


def test_kcat_lands_a_20_mb_payload_whole(landed):
    raw, canal, (op_key, op_value) = landed
    got = {(r.source_file.rsplit("/", 1)[-1], r.kafka_offset): (r.key, r.value) for r in raw.collect()}
    assert got == {("canal.jsonl", 0): (None, canal), ("canal.jsonl", 1): (None, canal[:-7]),
                   ("op.jsonl", 0): (op_key, op_value), ("op.jsonl", 1): (op_key, op_value[:-7])}


@pytest.mark.parametrize("protocol", ["canal-json", "open-protocol"])
def test_a_20_mb_message_is_message_too_large_with_its_size_digest_and_first_bytes(landed, protocol):
    raw, canal, (op_key, op_value) = landed
    key, value = (None, canal) if protocol == "canal-json" else (op_key, op_value)
    mine = raw.where(F.col("source_file").endswith("canal.jsonl" if protocol == "canal-json" else "op.jsonl"))
    rows = quarantined(get_decoder(protocol), mine)
    assert [(r["kafka_offset"], r["event_index"], r[REJECT_REASON]) for r in rows] == [
        (0, 0, "message_too_large"), (1, 0, "message_too_large")]  # one row each, never a decoded event
    size = len(key or b"") + len(value)
    assert rows[0][REJECT_DETAIL].startswith(f"{size} bytes (key {len(key or b'')}, value {len(value)}), "
                                             f"above max-message-bytes {16 << 20}")
    assert f"value SHA-256 {hashlib.sha256(value).hexdigest()}" in rows[0][REJECT_DETAIL]
    assert rows[0]["value"] == value[:KEPT_PREFIX_BYTES]
    assert rows[0]["key"] == (None if key is None else key[:KEPT_PREFIX_BYTES])


def test_below_max_message_bytes_a_20_mb_message_is_read_and_a_broken_one_keeps_its_reason_and_bytes(landed):
    raw, canal, _ = landed
    decoder = get_decoder("canal-json", {"max-message-bytes": str(32 << 20)})
    out = decoder.decode(raw.where(F.col("source_file").endswith("canal.jsonl"))).orderBy("kafka_offset").collect()
    assert [(r.kafka_offset, r[REJECT_REASON]) for r in out] == [(0, None), (1, "invalid_json")]
    assert len(out[0].after["body"]) == BIG + 1 and out[0].after["body"].startswith("üx")
    assert out[1].value == canal[:-7]  # all of its bytes
