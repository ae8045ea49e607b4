"""A window's messages hold each Kafka offset once: the newest landing of an offset landed
twice wins, and the copies dropped are counted."""

from __future__ import annotations

from cdc_assets.landing.tables import LANDED_SCHEMA
from cdc_assets.landing.window_messages import window_messages_once


def _row(partition: int, offset: int, value: bytes, source_file: str, landing_seq: int | None):
    return ("cdc", partition, offset, None, None, value, source_file, landing_seq, None)


def test_the_newest_landing_of_a_redelivered_offset_wins(spark):
    landed = spark.createDataFrame([
        _row(0, 0, b"a", "a.jsonl", 0),
        _row(0, 1, b"old", "a.jsonl", 0),
        _row(0, 1, b"new", "b.jsonl", 1),  # landed again by a later landing, other content
        _row(0, 2, b"x", "a.jsonl", 0),
        _row(0, 2, b"y", "c.jsonl", 0),  # twice in one landing: the later file wins
        _row(1, 1, b"other partition", "a.jsonl", 0),
    ], LANDED_SCHEMA)
    once = window_messages_once(landed)
    assert (once.landed, once.redelivered) == (6, 2)
    assert "landing_seq" not in once.messages.columns
    rows = sorted((r.kafka_partition, r.kafka_offset, bytes(r.value)) for r in once.messages.collect())
    assert rows == [(0, 0, b"a"), (0, 1, b"new"), (0, 2, b"y"), (1, 1, b"other partition")]


def test_without_copies_nothing_is_dropped(spark):
    once = window_messages_once(spark.createDataFrame([_row(0, 0, b"a", "a.jsonl", 0)], LANDED_SCHEMA))
    assert (once.landed, once.redelivered, once.messages.count()) == (1, 0, 1)
    empty = window_messages_once(spark.createDataFrame([], LANDED_SCHEMA))
    assert (empty.landed, empty.redelivered) == (0, 0)
