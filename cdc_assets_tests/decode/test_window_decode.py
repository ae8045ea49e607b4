"""The decode step of a window without Dagster: events, quarantine and the counts the
change log's metadata and quarantine checks report."""

from __future__ import annotations

import json

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA, QUARANTINE_COLUMNS
from cdc_assets.decode import get_decoder
from cdc_assets.decode.window_decode import decode_window
from cdc_assets_tests.helpers import raw_frame

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z, the raw frames' Kafka time
HOUR = 3_600_000


def canal(op: str, ms: int, ids: list[int], **over) -> bytes:
    return json.dumps({
        "id": 0, "database": "shop", "table": "orders", "pkNames": ["id"], "isDdl": False, "type": op,
        "es": ms, "ts": ms, "sql": "", "mysqlType": {"id": "int", "note": "varchar"},
        "data": [{"id": str(i), "note": "n"} for i in ids], "old": None,
        "_tidb": {"commitTs": ms_to_tso(ms)}, **over}).encode()


def test_a_window_decodes_to_events_a_quarantine_and_their_counts(spark):
    values = [
        canal("INSERT", T0 + 1_000, [1, 2, 3]),
        canal("DELETE", T0 + 2_000, [2]),
        canal("INSERT", T0 + 3_000, [4, 5], pkNames=None),    # missing_primary_key, one row for the message
        canal("UPSERT", T0 + 4_000, [6]),                     # unknown_event_type
        None,                                                 # empty_message
    ]
    raw = raw_frame(spark, values)
    with decode_window(get_decoder("canal-json"), raw, T0, HOUR) as w:
        assert [(f.name, f.dataType) for f in w.events.schema] == [(f.name, f.dataType) for f in CHANGE_LOG_SCHEMA]
        # The first action on the events (the change log's write) counts; the quarantine comes after it.
        assert sorted((r.op, r.pk_values[0]) for r in w.events.collect()) == [
            ("DELETE", "2"), ("INSERT", "1"), ("INSERT", "2"), ("INSERT", "3")]
        assert w.quarantine.columns == QUARANTINE_COLUMNS
        quarantined = {r.reason: r for r in w.quarantine.collect()}
        assert w.kinds == {"row": 4}
        assert w.messages == 5
        assert w.reasons == {"missing_primary_key": 1, "unknown_event_type": 1, "empty_message": 1}
        assert set(quarantined) == set(w.reasons)
        assert quarantined["missing_primary_key"].value == values[2]  # a reject keeps its raw bytes
        assert (w.quarantined, w.quarantined_messages, w.no_change_messages, w.no_change_records) == (3, 3, 0, 0)
        assert w.quarantine_rate == 3 / 5


def test_the_counts_are_observed_by_the_writes_and_equal_the_separate_counts(spark):
    """Issue 45: the window's counts ride on the change log's write (no job of their own) and
    equal what separate aggregates over the written frames give, with rejects of several
    kinds: a whole message, two events of one message (values that do not convert; their raw
    bytes are looked up again), an empty message."""
    from collections import Counter

    from cdc_assets.common.spark_session import jobs_since, spark_job_ids
    from cdc_assets.decode.common.raw_bytes import MESSAGE_KEY

    bad_values = canal("INSERT", T0 + 5_000, [7, 8, 9], mysqlType={"id": "int", "note": "int"},
                       data=[{"id": "7", "note": "1"}, {"id": "8", "note": "x"}, {"id": "9", "note": "y"}])
    values = [
        canal("INSERT", T0 + 1_000, [1, 2, 3]),
        canal("DELETE", T0 + 2_000, [2]),
        canal("INSERT", T0 + 3_000, [4, 5], pkNames=None),    # missing_primary_key
        bad_values,                                           # two invalid_value events, one message
        None,                                                 # empty_message
    ]
    raw = raw_frame(spark, values)
    with decode_window(get_decoder("canal-json"), raw, T0, HOUR) as w:
        before = spark_job_ids()
        events = w.events.collect()      # the change log's write
        event_jobs = jobs_since(before)
        quarantine = w.quarantine.collect()  # the quarantine's write
        jobs = jobs_since(before)
        rejected_messages = {tuple(r[c] for c in MESSAGE_KEY) for r in quarantine}
        assert w.messages == raw.count() == 5
        assert w.kinds == dict(Counter(r.event_kind for r in events)) == {"row": 5}
        assert w.reasons == dict(Counter(r.reason for r in quarantine)) == {
            "missing_primary_key": 1, "invalid_value": 2, "empty_message": 1}
        assert (w.quarantined, w.quarantined_messages, w.no_change_messages) == (4, len(rejected_messages), 0) == (
            4, 3, 0)
        assert w.quarantine_rate == 3 / 5
        assert {bytes(r.value) for r in quarantine if r.reason == "invalid_value"} == {bad_values}
        # The events' action fills the cache and counts, in one job; the quarantine's adds the
        # raw-bytes lookup of the invalid values (joins: AQE runs each shuffle stage as a job).
        assert event_jobs == 1
        assert jobs <= 8
