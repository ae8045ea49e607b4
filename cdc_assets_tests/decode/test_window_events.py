"""Each event is kept once, in the window of its commit time; implausible commit times are
quarantined for every protocol (decode/window_events.py, landing.routed_windows)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F, types as T

from cdc_assets.common.windows import ROUTED_WINDOWS, routed_windows
from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.window_events import IMPLAUSIBLE_COMMIT_TS, events_of_window
from cdc_assets.simulator.open_protocol import OpenProtocolEncoder
from cdc_assets.simulator.protocols import ENCODERS, make_encoder
from cdc_assets.simulator.schema import DEMO_TABLES
from cdc_assets.simulator.workload import Transaction, Workload
from cdc_assets_tests.helpers import raw_frame

HOUR = 3_600_000
W1 = 1_767_225_600_000  # 2026-01-01T00:00Z
W2 = W1 + HOUR
YEAR_2500_TSO = 16_725_225_600_000 << 18


def _changes(n: int):
    out = []
    for event in Workload(seed=3, row_changes=50).events():
        if isinstance(event, Transaction):
            out.extend(event.changes)
        if len(out) >= n:
            return out[:n]
    raise AssertionError("the workload is too short")


def _with_windows(raw, windows: list[int] | None):
    return raw.withColumn(ROUTED_WINDOWS, F.lit(windows).cast(T.ArrayType(T.LongType())))


def _kept(spark, protocol: str, raw, window_start_ms: int, options=None):
    decoder, opts = ENCODERS[protocol].decoder if protocol in ENCODERS else (protocol, {})
    decoded = get_decoder(decoder, options or opts).decode(raw.drop(ROUTED_WINDOWS))
    rows = events_of_window(decoded, raw, window_start_ms, HOUR).orderBy("kafka_offset", "event_index").collect()
    return [(r["event_index"], r["commit_ts"], r[REJECT_REASON]) for r in rows]


@pytest.mark.parametrize("protocol", ["canal-json", "debezium", "open-protocol"])
@pytest.mark.parametrize("commit_ts", [0, -1, YEAR_2500_TSO])
def test_an_absurd_commit_time_is_quarantined_never_applied(spark, protocol, commit_ts):
    if protocol == "open-protocol" and commit_ts < 0:
        pytest.skip("Open Protocol reads a negative key ts as missing (missing_commit_ts)")
    encoder = make_encoder(protocol, DEMO_TABLES)
    key, value = encoder.encode_row(_changes(1)[0], commit_ts, build_ms=W1 + 5)
    kept = _kept(spark, protocol, raw_frame(spark, [value], keys=[key]), W1)
    assert kept == [(0, commit_ts, IMPLAUSIBLE_COMMIT_TS)]


def test_a_canal_json_commit_ts_of_zero_is_not_replaced_by_es(spark):
    encoder = make_encoder("canal-json", DEMO_TABLES)
    _, value = encoder.encode_row(_changes(1)[0], 0, build_ms=W1 + 5)
    assert b'"commitTs":0' in value and b'"es":' in value
    assert [r[2] for r in _kept(spark, "canal-json", raw_frame(spark, [value]), W1)] == [IMPLAUSIBLE_COMMIT_TS]


def _batch(times_ms: list[int]):
    """One Open Protocol message batching one row event per time."""
    encoder = OpenProtocolEncoder(DEMO_TABLES)
    return encoder.merge([encoder.encode_row(c, t << 18, build_ms=t) for c, t in zip(_changes(len(times_ms)), times_ms)])


def test_a_batch_that_straddles_a_window_end_gives_each_window_its_own_events(spark):
    times = [W2 - 2_000, W2 - 1_000, W2 + 500]
    key, value = _batch(times)
    raw = raw_frame(spark, [value], keys=[key])
    routed = _with_windows(raw, [W2, W1])  # home: the window of the newest event
    assert _kept(spark, "open-protocol", routed, W1) == [(0, times[0] << 18, None), (1, times[1] << 18, None)]
    assert _kept(spark, "open-protocol", routed, W2) == [(2, times[2] << 18, None)]


def test_events_without_a_usable_time_stay_in_the_home_window_only(spark):
    key, value = _batch([W1 + 1_000, W2 + 1_000])
    raw = raw_frame(spark, [value + b"\x00\x00"], keys=[key])  # a broken frame after the events
    routed = _with_windows(raw, [W2, W1])
    in_w1 = _kept(spark, "open-protocol", routed, W1)
    in_w2 = _kept(spark, "open-protocol", routed, W2)
    rejects = [e for e in in_w1 + in_w2 if e[2] is not None]
    assert rejects and all(e in in_w2 for e in rejects)  # quarantined once, at home
    assert all(e[2] is None for e in in_w1)


def test_a_message_of_one_window_keeps_every_event(spark):
    key, value = _batch([W1 + 1_000, W1 + 2_000])
    raw = _with_windows(raw_frame(spark, [value], keys=[key]), None)
    assert [e[0] for e in _kept(spark, "open-protocol", raw, W1)] == [0, 1]


def test_routed_windows_lists_home_first_and_is_null_for_one_window(spark):
    df = spark.createDataFrame(
        [(W2 + 10, [W1 + 5, W2 + 10]), (W1 + 7, [W1 + 5, W1 + 7]), (None, [W1]), (W2 + 1, [W1 + 1, 5, W2 + 1])],
        "routing_ms long, event_ms array<long>")
    got = [r[0] for r in df.select(routed_windows(F.col("routing_ms"), F.col("event_ms"), HOUR)).collect()]
    # the 5 ms time (1970) is not plausible: it opens no window
    assert got == [[W2, W1], None, None, [W2, W1]]

