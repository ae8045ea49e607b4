"""Quarantine rows rejected after decoding get their message's raw bytes back by lineage."""

from cdc_assets.contracts.schemas import QUARANTINE_SCHEMA, RAW_MESSAGE_SCHEMA
from cdc_assets.decode.common.raw_bytes import refill_raw_bytes


def _quarantine_row(offset: int, reason: str, key: bytes | None, value: bytes | None) -> tuple:
    row = {f.name: None for f in QUARANTINE_SCHEMA.fields}
    row.update(topic="t", kafka_partition=0, kafka_offset=offset, event_index=0, reason=reason, key=key, value=value)
    return tuple(row[f.name] for f in QUARANTINE_SCHEMA.fields)


def test_only_rows_of_the_named_reasons_without_bytes_are_refilled(spark):
    raw = spark.createDataFrame(
        [("t", 0, offset, None, f"k{offset}".encode(), f"v{offset}".encode(), "f") for offset in range(4)]
        + [("t", 0, 1, None, b"k1", b"v1", "g")],  # the same message in two dump files
        RAW_MESSAGE_SCHEMA)
    rejected = spark.createDataFrame([
        _quarantine_row(1, "invalid_value", None, None),
        _quarantine_row(2, "invalid_json", b"own-key", b"own-value"),  # the decoder's own reject keeps its bytes
        _quarantine_row(3, "empty_message", None, None),  # another reason: left as it is
        _quarantine_row(9, "invalid_value", None, None),  # no such message: stays null, never dropped
    ], QUARANTINE_SCHEMA)
    out = refill_raw_bytes(rejected, raw, ["invalid_value"])
    assert out.columns == rejected.columns
    rows = sorted((r.kafka_offset, r.reason, r.key, r.value) for r in out.collect())
    assert rows == [
        (1, "invalid_value", b"k1", b"v1"),
        (2, "invalid_json", b"own-key", b"own-value"),
        (3, "empty_message", None, None),
        (9, "invalid_value", None, None),
    ]
