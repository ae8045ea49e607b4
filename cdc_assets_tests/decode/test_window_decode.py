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
        assert w.quarantine.columns == QUARANTINE_COLUMNS
        assert sorted((r.op, r.pk_values[0]) for r in w.events.collect()) == [
            ("DELETE", "2"), ("INSERT", "1"), ("INSERT", "2"), ("INSERT", "3")]
        quarantined = {r.reason: r for r in w.quarantine.collect()}
        assert w.kinds == {"row": 4}
        assert w.messages == 5
        assert w.reasons == {"missing_primary_key": 1, "unknown_event_type": 1, "empty_message": 1}
        assert set(quarantined) == set(w.reasons)
        assert quarantined["missing_primary_key"].value == values[2]  # a reject keeps its raw bytes
        assert (w.quarantined, w.quarantined_messages, w.no_change_messages, w.no_change_records) == (3, 3, 0, 0)
        assert w.quarantine_rate == 3 / 5
