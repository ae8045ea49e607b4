"""Late and duplicate flags on change-log rows built by hand, against plain-Python references."""

from __future__ import annotations

import random

from pyspark.sql import functions as F

from cdc_assets.align import change_table as alignment
from cdc_assets.align.change_table import mark_late_and_duplicates
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA, ROW
from cdc_assets.landing.window_messages import WATERMARK_INDEX_SCHEMA
from cdc_assets_tests.helpers import count_alignment

START = 1_000 << 18  # the window start, as a TSO


def _event(partition: int, offset: int, commit_ts: int, index: int = 0, op: str = "INSERT",
           before: dict | None = None, after: dict | None = None, topic: str = "t") -> dict:
    row = dict.fromkeys(CHANGE_LOG_SCHEMA.fieldNames())
    row.update(topic=topic, kafka_partition=partition, kafka_offset=offset, event_index=index,
               event_kind=ROW, op=op, database="db", table="tb", commit_ts=commit_ts,
               pk_names=["id"], pk_values=[str(offset)], before=before,
               after=after if after is not None or before is not None else {"id": str(offset)})
    return row


def _flags(spark, events: list[dict], marks: list[tuple]) -> dict:
    marked = mark_late_and_duplicates(
        spark.createDataFrame(events, CHANGE_LOG_SCHEMA), spark.createDataFrame(marks, WATERMARK_INDEX_SCHEMA), START)
    rows = marked.select("topic", "kafka_partition", "kafka_offset", "event_index", "_late", "_duplicate").collect()
    assert len(rows) == len(events)  # no event matched two watermark intervals
    return {(r.topic, r.kafka_partition, r.kafka_offset, r.event_index): (r._late, r._duplicate) for r in rows}


def test_late_flags_match_the_rule_over_random_partitions(spark):
    """Late = below the highest watermark above the window start at or before the event's offset
    in its partition. Offsets span far more than the lookup's 4,096 buckets, watermarks repeat an
    offset, move backwards, lie past the last event, or are missing in a partition."""
    rng = random.Random(7)
    events, marks = [], []
    for topic, partition, span in (("t", 0, 300_000), ("t", 1, 5_000), ("t", 2, 40), ("u", 0, 3_000)):
        offsets = sorted(rng.sample(range(span), min(span, 400)))
        mark_offsets = set(rng.sample(offsets, 60)) if partition != 2 else set()
        for offset in offsets:
            ts = START + rng.randrange(-50, 2_000)
            if offset in mark_offsets:
                marks.append((topic, partition, offset, ts))
                if rng.random() < 0.2:  # the same offset landed twice
                    marks.append((topic, partition, offset, ts + rng.randrange(-5, 5)))
                if rng.random() < 0.2:  # an event at the watermark's own offset counts it
                    events.append(_event(partition, offset, ts + rng.randrange(-5, 5), index=1, topic=topic))
            else:
                events.append(_event(partition, offset, ts, topic=topic))
        marks.append((topic, partition, span + 10, START + 10_000))  # after every event
    marks.append(("t", 9, 5, START + 10_000))  # a partition without events

    def late(e: dict) -> bool:
        prior = [ts for t, p, o, ts in marks
                 if (t, p) == (e["topic"], e["kafka_partition"]) and o <= e["kafka_offset"] and ts > START]
        return bool(prior) and e["commit_ts"] < max(prior)

    flags = _flags(spark, events, marks)
    expected = {(e["topic"], e["kafka_partition"], e["kafka_offset"], e["event_index"]): late(e) for e in events}
    assert {k: v[0] for k, v in flags.items()} == expected
    assert 50 < sum(expected.values()) < len(expected) - 50  # both outcomes are exercised


def test_copies_are_duplicates_whatever_their_column_order(spark):
    image, reordered = {"id": "1", "a": "x", "b": None}, {"b": None, "a": "x", "id": "1"}
    events = [
        _event(0, 10, START + 5, after=image),
        _event(0, 11, START + 5, after=reordered),  # a copy: same entries, other order
        _event(0, 12, START + 5, after={"id": "1", "a": "y", "b": None}),  # another image
        # entries that would read the same with their nulls skipped: a, "b", b, id, "1"
        _event(0, 13, START + 5, after={"id": "1", "a": "b", "b": None}),
        _event(0, 14, START + 5, after={"id": "1", "a": None, "b": "b"}),
        # the same image as before rather than after: not a copy of either
        _event(1, 20, START + 5, op="READ", before=image),
        _event(1, 21, START + 5, op="READ", after=image),
    ]
    for e in events:
        e["pk_values"] = ["1"]
    flags = _flags(spark, events, [])
    assert {k[1:]: v[1] for k, v in flags.items()} == {
        (0, 10, 0): False, (0, 11, 0): True, (0, 12, 0): False, (0, 13, 0): False,
        (0, 14, 0): False, (1, 20, 0): False, (1, 21, 0): False}
    counts = count_alignment(mark_late_and_duplicates(
        spark.createDataFrame(events, CHANGE_LOG_SCHEMA), spark.createDataFrame([], WATERMARK_INDEX_SCHEMA), START))
    assert (counts.events_in, counts.duplicates, counts.late, counts.events_out) == (7, 1, 0, 6)


def test_images_with_the_same_hash_are_still_compared_before_a_drop(spark, monkeypatch):
    """Images enter the dedup partition as hashes; a collision must not make a different
    image a duplicate (every image hashes alike here). The price of a collision: a copy of
    any event but the first of the group is kept."""
    monkeypatch.setattr(alignment, "_image_hash", lambda m: F.lit(0))
    first, other = {"id": "1", "a": "x"}, {"id": "1", "a": "y"}
    events = [
        _event(0, 10, START + 5, after=first),
        _event(0, 11, START + 5, after=other),
        _event(0, 12, START + 5, after={"a": "x", "id": "1"}),  # a copy of the first
        _event(0, 13, START + 5, op="UPDATE", before=first, after=other),
        _event(0, 14, START + 5, op="UPDATE", before=other, after=other),
        _event(0, 15, START + 5, op="UPDATE", before=first, after=other),  # a copy of offset 13
        _event(0, 16, START + 5, after=other),  # a copy of offset 11, not of the group's first
    ]
    for e in events:
        e["pk_values"] = ["1"]
    flags = _flags(spark, events, [])
    assert {k[2]: v[1] for k, v in flags.items()} == {
        10: False, 11: False, 12: True, 13: False, 14: False, 15: True, 16: False}


def test_images_that_differ_only_in_where_their_nulls_are_do_not_share_a_hash(spark):
    """Spark's hashes skip null values: without care {a: "b", b: null} and {a: null, b: "b"}
    (and a null image and an empty one) would share a group, and the copy of the second
    would be compared with the first and kept."""
    pairs = [({"id": "1", "a": "b", "b": None}, {"id": "1", "a": None, "b": "b"}),
             (None, {})]
    events = []
    for i, (one, two) in enumerate(pairs):
        base = 10 * (i + 1)
        for offset, image in ((base, one), (base + 1, two), (base + 2, one), (base + 3, two)):
            events.append(_event(0, offset, START + 5, op="UPDATE", before={"id": "1"}, after=image))
    for e in events:
        e["pk_values"] = ["1"]
    flags = _flags(spark, events, [])
    assert {k[2]: v[1] for k, v in flags.items()} == {
        10: False, 11: False, 12: True, 13: True, 20: False, 21: False, 22: True, 23: True}


def test_the_write_observes_the_counts_and_the_events_per_minute_as_the_separate_actions_counted(spark):
    """Issue 45: the change table's counts and its events-per-minute chart are observed by the
    job that writes it (before the kept-filter, so late, duplicate and outside events count),
    equal to the aggregates that used to run as actions of their own."""
    from cdc_assets.align.change_table import aligned_events, observe_alignment
    from cdc_assets.common.spark_session import jobs_since, spark_job_ids
    from cdc_assets.common.tso import tso_ms_col

    start_ms, hour = 1_767_225_600_000, 3_600_000  # windows start on a whole hour
    start = start_ms << 18

    def at(ms: int) -> int:
        return (start_ms + ms) << 18

    events = [_event(0, o, at(o * 61_000)) for o in range(10)]  # one a minute or so
    events += [_event(0, 20, at(5_000), after={"id": "0"}), _event(0, 21, at(5_000), after={"id": "0"})]
    for e in events[-2:]:
        e["pk_values"] = ["0"]  # offset 21 is a copy of offset 20
    events += [_event(1, 30, at(1_000)), _event(1, 5, at(120_000)), _event(1, 31, at(hour + 1))]  # late, -, outside
    marks = [("t", 1, 10, at(200_000))]
    changes = spark.createDataFrame(events, CHANGE_LOG_SCHEMA)
    marked = mark_late_and_duplicates(changes, spark.createDataFrame(marks, WATERMARK_INDEX_SCHEMA), start,
                                      at(hour))
    expected = count_alignment(marked)
    minute = F.floor(tso_ms_col(F.col("commit_ts")) / 60_000).cast("long") * 60_000
    per_minute = {r.m: r.n for r in aligned_events(marked).groupBy(minute.alias("m")).agg(F.count("*").alias("n"))
                  .collect()}

    before = spark_job_ids()
    aligned_events(marked).collect()  # the write alone, unobserved
    plain_jobs = jobs_since(before)
    observed = observe_alignment(marked, start_ms, hour, 60)
    before = spark_job_ids()
    written = observed.aligned.collect()  # the write's one action
    jobs = jobs_since(before)
    assert len(written) == expected.events_out
    assert observed.counts() == expected
    assert (expected.events_in, expected.duplicates, expected.late, expected.outside_window) == (15, 1, 1, 1)
    assert observed.events_per_bar() == per_minute and sum(per_minute.values()) == expected.events_out
    # The write's own jobs (AQE runs each shuffle stage as a job; its splits may vary by one
    # run to run): the counts add none, where they cost three actions.
    assert jobs <= plain_jobs + 1

    wide = observe_alignment(marked, start_ms, 24 * hour, 60)  # 24-minute bars
    wide.aligned.collect()
    assert wide.events_per_bar() == {start_ms: expected.events_out}
    from cdc_assets.defs.metadata import events_per_minute_chart
    assert (events_per_minute_chart(wide.events_per_bar(), start_ms, 24 * hour)
            == events_per_minute_chart(per_minute, start_ms, 24 * hour))


def test_every_bar_of_a_window_spread_over_many_tasks_is_its_exact_count(spark):
    """The bars are one observed `histogram_numeric`: each task keeps a bin per bar, and the
    tasks' bins of a bar merge into one with the exact sum. 6,000 events over all 60 minutes
    and 8 tasks (so every bar is merged from several), against a grouped count."""
    from cdc_assets.align.change_table import aligned_events, observe_alignment
    from cdc_assets.common.tso import tso_ms_col

    start_ms, hour = 1_767_225_600_000, 3_600_000
    rng = random.Random(11)
    events = [_event(rng.randrange(3), o, (start_ms + rng.randrange(hour)) << 18) for o in range(6_000)]
    marked = mark_late_and_duplicates(
        spark.createDataFrame(events, CHANGE_LOG_SCHEMA).repartition(8),
        spark.createDataFrame([], WATERMARK_INDEX_SCHEMA), start_ms << 18, (start_ms + hour) << 18)
    minute = F.floor(tso_ms_col(F.col("commit_ts")) / 60_000).cast("long") * 60_000
    per_minute = {r.m: r.n for r in aligned_events(marked).groupBy(minute.alias("m")).agg(F.count("*").alias("n"))
                  .collect()}
    observed = observe_alignment(marked.repartition(8), start_ms, hour, 60)
    observed.aligned.collect()
    assert len(per_minute) == 60 and sum(per_minute.values()) == 6_000
    assert observed.events_per_bar() == per_minute
    five = observe_alignment(marked.repartition(8), start_ms, hour, 12)  # 5-minute bars
    five.aligned.collect()
    assert five.events_per_bar() == {
        start_ms + b * 300_000: sum(n for m, n in per_minute.items() if (m - start_ms) // 300_000 == b)
        for b in range(12)}
