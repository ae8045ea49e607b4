"""A group of windows decoded and aligned in one pass gives each window exactly what that
window decoded and aligned alone gives (the per-window path: `decode_window` and
`mark_late_and_duplicates` against the window's own bounds)."""

from __future__ import annotations

from collections import Counter

from pyspark.sql import functions as F

from cdc_assets.align.change_table import aligned_events, alignment_metrics, mark_late_and_duplicates
from cdc_assets.align.window_group import aligned_windows, groups
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.contracts.schemas import CHANGE_LOG_COLUMNS, WATERMARK
from cdc_assets.decode import get_decoder
from cdc_assets.decode.window_decode import decode_window
from cdc_assets.landing.window_messages import WATERMARK_INDEX_SCHEMA
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.helpers import raw_frame

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOUR = 3_600_000
STARTS = [T0, T0 + HOUR, T0 + 2 * HOUR]


def _tso(start: int, s: int) -> int:
    return ms_to_tso(start + s * 1_000)


def _window_messages(k: int, start: int) -> list[bytes]:
    """Rows, an at-least-once copy, a watermark and an event below it (late), a value that
    does not convert (quarantined), and in the middle window an event of the next window's
    time (outside its window). Ids repeat across windows: a copy is a copy in its window only."""
    messages = [
        row("INSERT", _tso(start, 1), values(1, f"a{k}")),
        row("INSERT", _tso(start, 2), values(2, f"b{k}")),
        row("INSERT", _tso(start, 1), values(1, f"a{k}")),              # the same event again: a duplicate
        watermark(_tso(start, 30)),
        row("UPDATE", _tso(start, 20), values(2, f"c{k}"), values(2, f"b{k}")),  # below the watermark: late
        row("INSERT", _tso(start, 40), values(3, "d", big="not a number")),    # invalid_value
        row("INSERT", _tso(start, 50), values(4, f"e{k}")),
    ]
    if k == 1:
        messages.append(row("INSERT", _tso(start + HOUR, 5), values(5, "x")))  # outside the window
    return messages


def _raw(spark):
    """Each window's raw messages on one Kafka partition, offsets increasing across windows,
    and the watermark index the landing would hold for them."""
    raw, marks, base = {}, [], 0
    for k, start in enumerate(STARTS):
        msgs = _window_messages(k, start)
        raw[start] = raw_frame(spark, msgs).withColumn("kafka_offset", F.col("kafka_offset") + base)
        marks.append(("t", 0, base + 3, _tso(start, 30)))
        base += len(msgs)
    return raw, spark.createDataFrame(marks, WATERMARK_INDEX_SCHEMA)


def _flags(frame) -> list[tuple]:
    return sorted(tuple(r) for r in frame.select(
        "kafka_offset", "event_index", "_late", "_duplicate", "_outside").collect())


def _rows(frame) -> list[tuple]:
    return sorted((r.kafka_offset, r.event_index, r.op, r.commit_ts, tuple(sorted((r.after or {}).items())))
                  for r in frame.collect())


def test_each_window_of_a_group_is_what_it_alone_gives(spark):
    raw, marks = _raw(spark)
    decoder = get_decoder("canal-json")
    alone = {}
    for start in STARTS:
        with decode_window(decoder, raw[start], start, HOUR) as w:
            marked = mark_late_and_duplicates(w.events, marks, ms_to_tso(start), ms_to_tso(start + HOUR),
                                              offsets=raw[start])
            events = w.events.collect()
            alone[start] = {
                "flags": _flags(marked), "aligned": _rows(aligned_events(marked)),
                "counts": marked.agg(*alignment_metrics()).first().asDict(),
                "kinds": w.kinds, "reasons": w.reasons, "messages": w.messages,
                "quarantine": sorted((r.kafka_offset, r.reason, bytes(r.value)) for r in w.quarantine.collect()),
                "events": len(events),
            }
    with aligned_windows(decoder, raw, marks, HOUR) as windows:
        assert sorted(windows) == STARTS
        for start in STARTS:
            w = windows[start]
            marked = w.flagged.where(F.col("event_kind") != WATERMARK)
            events = w.flagged.collect()  # the change table's write: fills the window's counts
            assert w.flagged.columns == [*CHANGE_LOG_COLUMNS, "_late", "_duplicate", "_outside"]
            got = {
                "flags": _flags(marked), "aligned": _rows(aligned_events(marked)),
                "counts": marked.agg(*alignment_metrics()).first().asDict(),
                "kinds": w.kinds, "reasons": w.reasons, "messages": w.messages,
                "quarantine": sorted((r.kafka_offset, r.reason, bytes(r.value)) for r in w.quarantine.collect()),
                "events": len(events),
            }
            assert got == alone[start], start
    # What the windows hold, by hand: 7 messages (8 in the middle one), 1 duplicate, 1 late
    # and 1 quarantined each, and the middle window's event of the next hour outside it.
    first, middle = alone[STARTS[0]], alone[STARTS[1]]
    assert first["messages"] == 7 and middle["messages"] == 8
    assert first["reasons"] == {"invalid_value": 1}
    assert first["kinds"] == {"row": 5, "watermark": 1}
    assert {k: first["counts"][k] for k in ("late", "duplicates", "outside_window", "events_out")} == {
        "late": 1, "duplicates": 1, "outside_window": 0, "events_out": 3}
    assert {k: middle["counts"][k] for k in ("late", "duplicates", "outside_window", "events_out")} == {
        "late": 1, "duplicates": 1, "outside_window": 1, "events_out": 3}
    assert [a[2] for a in first["aligned"]] == ["INSERT", "INSERT", "INSERT"]


def test_groups_are_consecutive_runs_up_to_the_limit_and_taken_lazily():
    sizes = [5, 3, 4, 20, 1, 1]
    assert list(groups(iter(sizes), lambda n: n, limit=10)) == [[5, 3], [4], [20], [1, 1]]
    taken = []

    def windows():
        for n in sizes:
            taken.append(n)
            yield n

    first = next(groups(windows(), lambda n: n, limit=10))
    assert first == [5, 3] and taken == [5, 3, 4]  # one window ahead of the group, no more
    assert Counter(map(len, groups(iter([1] * 7), lambda n: n, limit=3))) == {3: 2, 1: 1}
