"""Watermarks that move backwards or make no sense are ignored and reported, never trusted."""

from __future__ import annotations

import json
from pathlib import Path

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.decode import get_decoder
from cdc_assets.landing.land import land
from cdc_assets_tests.canal_messages import row, values, watermark

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _kcat_file(path: Path, messages: list[tuple]) -> None:
    """(offset, payload) with Kafka timestamp T0, or (offset, payload, kafka_timestamp_ms)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(
        json.dumps({"topic": "cdc", "partition": 0, "offset": off, "tstype": "create", "ts": ts[0] if ts else T0,
                    "broker": 1, "key": None, "payload": payload.decode()}) + "\n"
        for off, payload, *ts in messages
    ))


def _land(spark, dump: Path, warehouse: Path):
    return land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"),
                warehouse=warehouse, source="src", window_ms=HOUR)


def test_backwards_and_implausible_watermarks_are_reported_and_ignored(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    high, low = ms_to_tso(T0 + 2 * HOUR), ms_to_tso(T0 + HOUR)
    _kcat_file(dump / "a.jsonl", [
        (0, watermark(low)),
        (1, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
        (2, watermark(high)),
        (3, watermark(low)),             # replayed resolved ts: moves backwards
        (4, watermark(5 << 18)),         # 1970: a corrupted ts
    ])
    first = _land(spark, dump, warehouse)
    assert first.regressed_watermarks == {"cdc/0": 1}
    assert first.implausible_watermarks == {"cdc/0": 1}
    assert first.state.global_watermark_ts() == high  # the maximum is kept

    # A later batch replays an old watermark at a higher offset: reported across batches.
    _kcat_file(dump / "b.jsonl", [(5, watermark(low)), (6, watermark(high + 1))])
    second = _land(spark, dump, warehouse)
    assert second.regressed_watermarks == {"cdc/0": 1}
    assert second.implausible_watermarks == {}
    part = second.state.partitions["cdc/0"]
    assert (part.regressed_watermarks, part.implausible_watermarks) == (2, 1)
    assert second.state.global_watermark_ts() == high + 1


def test_a_future_watermark_beyond_2200_does_not_complete_windows(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    _kcat_file(dump / "a.jsonl", [
        (0, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
        (1, watermark(ms_to_tso(9_000_000_000_000))),  # year 2255
    ])
    result = _land(spark, dump, warehouse)
    assert result.implausible_watermarks == {"cdc/0": 1}
    assert result.state.global_watermark_ts() is None
    assert result.state.complete_windows(HOUR) == []


def test_a_message_without_a_usable_time_joins_the_earliest_window_of_its_batch(spark, tmp_path):
    """Not JSON and a Kafka timestamp of 1970: unroutable, so it is landed in the first window
    its batch opens (quarantined there with its lineage), or the newest known window when its
    batch opens none; never dropped, never a window of its own."""
    from cdc_assets.landing.window_messages import read_window_messages

    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    later = T0 + 2 * HOUR
    _kcat_file(dump / "a.jsonl", [(0, row("INSERT", ms_to_tso(later + 10), values(1, "a")), later),
                                  (1, row("INSERT", ms_to_tso(later + HOUR + 10), values(2, "b")), later),
                                  (2, b"not a message", 5)])
    first = _land(spark, dump, warehouse)
    assert first.messages == 3 and sorted(first.state.windows) == [later, later + HOUR]
    assert sorted(r.kafka_offset for r in read_window_messages(spark, warehouse, "src", later).collect()) == [0, 2]

    _kcat_file(dump / "b.jsonl", [(3, b"still not a message", 5)])
    second = _land(spark, dump, warehouse)
    assert second.messages == 1 and sorted(second.state.windows) == [later, later + HOUR]
    newest = read_window_messages(spark, warehouse, "src", later + HOUR).collect()
    assert sorted(r.kafka_offset for r in newest) == [1, 3]
    assert {r.value for r in newest if r.kafka_offset == 3} == {b"still not a message"}
