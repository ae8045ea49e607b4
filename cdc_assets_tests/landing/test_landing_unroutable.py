"""Issue 44, items 2 and 6: messages the landing cannot route are counted by reason, file and
Kafka partition; a layout named explicitly reads every file or says why not; a replay that
completes no window, or lands nothing, exits 1 with one line saying why."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from cdc_assets.cli import main as cli_main
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.decode import get_decoder
from cdc_assets.defs.metadata import watermark_table
from cdc_assets.landing.land import land
from cdc_assets.landing.layouts import get_layout
from cdc_assets.landing.routing import unroutable_line
from cdc_assets.landing.state import BatchStats, LandingState, PartitionProgress, UnroutableFile
from cdc_assets_tests.canal_messages import row, values, watermark

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _kcat(path: Path, records: list[tuple[int, int, bytes | None, bytes]]) -> Path:
    """kcat -J lines: (partition, offset, key, payload)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"topic": "cdc", "partition": p, "offset": o, "tstype": "create", "ts": T0 + 5_000 + o,
                         "broker": 1, "key": None if k is None else k.decode("latin-1"),
                         "payload": v.decode("latin-1")})
             for p, o, k, v in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def _b64(data: bytes) -> bytes:
    return base64.b64encode(data)


# An Open Protocol key frame (version 1, then a length-prefixed JSON) as base64 text.
FRAME = b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00\x00\x00\x00\x00\x00\x00\x18" + b'{"ts":1,"t":1,"scm":"a"}'


def test_unroutable_messages_are_counted_by_reason_file_and_partition(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    _kcat(dump / "good.jsonl", [
        (0, 0, None, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
        (0, 1, None, b"eyJub3QiOiJjYW5hbCJ9"),  # base64 text of a JSON object: no time of canal-json
        (0, 2, None, watermark(ms_to_tso(T0 + HOUR))),
    ])
    _kcat(dump / "bad.jsonl", [(1, o, _b64(FRAME), _b64(b"\x00" * 8)) for o in range(3)])
    result = land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"),
                  warehouse=warehouse, source="src", window_ms=HOUR)

    assert result.unroutable_files == {
        "bad.jsonl": UnroutableFile(3, {"no_time_in_message": 3}),
        "good.jsonl": UnroutableFile(3, {"no_time_in_message": 1}),
    }
    state = result.state
    assert (state.partitions["cdc/0"].unroutable, state.partitions["cdc/1"].unroutable) == (
        {"no_time_in_message": 1}, {"no_time_in_message": 3})
    assert state.whole_unroutable_files() == ["bad.jsonl"]
    assert state.unroutable_messages() == 4
    # Still placed by their Kafka timestamp (routing is unchanged): in the first window.
    assert state.windows == {T0: 5, T0 + HOUR: 1}  # the watermark: in the window of its time
    assert state.first_unroutable == {
        "file": "bad.jsonl", "topic": "cdc", "kafka_partition": 1, "kafka_offset": 0,
        "reason": "no_time_in_message", "key_first_bytes": repr(_b64(FRAME)[:24]),
        "value_first_bytes": repr(_b64(b"\x00" * 8))}
    assert unroutable_line(state, "canal-json") == (
        "4 message(s) not routable as canal-json (no_time_in_message: 4): first in file bad.jsonl, "
        f"partition cdc/1, offset 0: first bytes of key {_b64(FRAME)[:24]!r}, of value b'AAAAAAAAAAA='")
    # Persisted: a new landing of nothing keeps the counts.
    again = land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"),
                 warehouse=warehouse, source="src", window_ms=HOUR)
    assert (again.unroutable_files, again.state.unroutable_messages()) == ({}, 4)


def _stats(partitions: list[PartitionProgress]) -> BatchStats:
    return BatchStats(sum(p.messages for p in partitions), partitions, {T0: 1})


def _partition(wm: int | None, offset: int) -> PartitionProgress:
    return PartitionProgress("cdc", 0, messages=1, max_offset=offset, max_watermark_ts=wm, max_routing_ms=T0 + offset)


def test_a_line_that_is_no_kcat_record_is_named_by_its_file_and_line(spark, tmp_path):
    dump = tmp_path / "dump"
    path = _kcat(dump / "a.jsonl", [(0, 0, None, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
                                    (0, 1, None, watermark(ms_to_tso(T0 + HOUR)))])
    path.write_bytes(path.read_bytes() + b"\nnot a kcat record\n")  # line 4, after a blank line
    result = land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"),
                  warehouse=tmp_path / "warehouse", source="src", window_ms=HOUR)
    first = result.state.first_unroutable
    assert (first["file"], first["line"], first["reason"]) == ("a.jsonl", "line 4", "unparsed_record")
    assert unroutable_line(result.state, "canal-json") == (
        "1 message(s) not routable as canal-json (unparsed_record: 1): first in file a.jsonl, line 4 (not a "
        "record of the layout): first bytes of key null, of value b'not a kcat record'")


def test_the_ui_table_shows_none_yet_and_for_how_long():
    state = LandingState()
    state.apply_batch("a", ["d1"], _stats([_partition(None, 1)]), now=1_000.0)
    assert "| cdc/0 | none yet | none yet | 2 min 5 s |" in watermark_table(state, now=1_125.0)
    state.apply_batch("b", ["d2"], _stats([_partition(ms_to_tso(T0 + 5), 2)]), now=2_000.0)
    state.apply_batch("c", ["d3"], _stats([_partition(ms_to_tso(T0 + 5), 3)]), now=3_000.0)  # did not move
    table = watermark_table(state, now=2_000.0 + 2 * 3600 + 60)
    assert f"| cdc/0 | {ms_to_tso(T0 + 5)} | 2026-01-01T00:00:00.005000+00:00 | 2 h 1 min |" in table
    assert LandingState.from_json(state.to_json()).partitions["cdc/0"].watermark_since == 2_000.0


# -- a layout named explicitly (item 6) -------------------------------------------------------
def test_a_named_line_layout_reads_every_non_hidden_file(tmp_path):
    for name in ["dump.out", "part.jsonl", ".hidden.jsonl", "_SUCCESS", "sub/more.log"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    files, refused, ignored = get_layout("kcat-jsonl").scan_named(tmp_path)
    assert ([str(p.relative_to(tmp_path)) for p in files], refused, ignored) == (
        ["dump.out", "part.jsonl", "sub/more.log"], {}, {})
    assert [p.name for p in get_layout("kcat-jsonl").scan(tmp_path)[0]] == ["part.jsonl"]  # detection


def test_a_named_parquet_layout_reads_parquet_by_content_and_names_the_rest(tmp_path):
    pq.write_table(pa.table({"value": [b"x"]}), tmp_path / "part-0.snappy")
    (tmp_path / "notes.txt").write_text("hello")
    files, _, ignored = get_layout("kafka-parquet").scan_named(tmp_path)
    assert [p.name for p in files] == ["part-0.snappy"]
    assert {p.name: why for p, why in ignored.items()} == {
        "notes.txt": "not a Parquet file (starts with b'hell', not b'PAR1')"}


def test_a_named_storage_sink_names_stray_files_but_not_its_index(tmp_path):
    tv = ms_to_tso(T0)
    for name in [f"db/t/{tv}/CDC000001.json", f"db/t/{tv}/meta/CDC.index", "metadata", "db/t/notes.md"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    files, _, ignored = get_layout("storage-sink").scan_named(tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in files] == [f"db/t/{tv}/CDC000001.json"]
    assert [str(p.relative_to(tmp_path)) for p in ignored] == ["db/t/notes.md"]
    assert ignored[tmp_path / "db/t/notes.md"].startswith("not a storage-sink file")


# -- replays (Spark, through Dagster) ----------------------------------------------------------
def _replay(capsys, dump: Path, warehouse: Path, *args: str) -> tuple[int, dict, str]:
    code = cli_main(["replay", "--input", str(dump), "--warehouse", str(warehouse), "--source", "src", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out.strip().splitlines()[-1]), err


def test_a_replay_of_base64_open_protocol_exits_1_saying_why(spark, tmp_path, capsys):
    """The issue's dump: Open Protocol keys and values written as base64 text."""
    dump = tmp_path / "dump"
    _kcat(dump / "topic.jsonl", [(p, o, _b64(FRAME), _b64(b"\x00" * 16)) for p in (0, 1) for o in range(3)])
    code, summary, err = _replay(capsys, dump, tmp_path / "wh", "--protocol", "open-protocol")
    assert code == 1 and not summary["ok"]
    assert (summary["messages"], summary["unroutable"], summary["windows"]) == (6, 6, 0)
    assert summary["checks_failed"] == ["src/landed_dump:messages_routable@landing"]  # the whole file
    (line,) = [x for x in err.splitlines() if "no window can complete" in x]
    assert line == (
        "[src] no window can complete: no watermark in partition(s) cdc/0, cdc/1; 6 message(s) not routable "
        "as open-protocol (no_time_in_message: 6): first in file topic.jsonl, partition cdc/0, offset 0: "
        f"first bytes of key {_b64(FRAME)[:24]!r}, of value {_b64(bytes(16))!r}")


def test_a_named_layout_lands_other_names_or_says_why_and_exits_1_on_nothing(spark, tmp_path, capsys):
    dump = tmp_path / "dump"
    _kcat(dump / "topic.out", [(0, 0, None, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
                               (0, 1, None, watermark(ms_to_tso(T0 + HOUR)))])
    code, summary, _ = _replay(capsys, dump, tmp_path / "wh", "--protocol", "canal-json", "--layout", "kcat-jsonl")
    assert (code, summary["files_landed"], summary["files_ignored"], summary["windows"], summary["rows"]) == (
        0, 1, 0, 1, 1)

    code, summary, err = _replay(capsys, dump, tmp_path / "wh2", "--protocol", "canal-json",
                                 "--layout", "kafka-parquet")
    assert code == 1 and not summary["ok"]
    assert (summary["files_landed"], summary["files_ignored"], summary["messages"]) == (0, 1, 0)
    assert '[src] skipped topic.out: not a Parquet file (starts with b\'{"to\', not b\'PAR1\')' in err
    assert f"[src] landed nothing from {dump} as kafka-parquet: 1 file(s) skipped (above)" in err


def test_a_source_whose_time_is_the_kafka_timestamp_counts_nothing_unroutable(spark, tmp_path):
    """`Decoder.routes_by_kafka_timestamp`: the record timestamp is then the message's own time."""
    decoder = get_decoder("canal-json")
    decoder.routes_by_kafka_timestamp = lambda: True
    dump = tmp_path / "dump"
    _kcat(dump / "topic.jsonl", [(0, 0, None, b'{"type":"INSERT","data":[{"id":"1"}]}')])
    result = land(spark, dump_root=dump, layout="kcat-jsonl", decoder=decoder, warehouse=tmp_path / "warehouse",
                  source="src", window_ms=HOUR)
    assert (result.unroutable_files, result.state.unroutable_messages(), result.state.windows) == ({}, 0, {T0: 1})


def test_the_no_window_line_says_how_far_the_watermark_got():
    from cdc_assets.landing.state import Completeness
    from cdc_assets.replay import _why_no_window

    partition = _partition(ms_to_tso(T0 + 10), 2)
    partition.unroutable = {"implausible_time": 1}
    state = LandingState(window_ms=HOUR, windows={T0: 3}, partitions={"cdc/0": partition})
    state.first_unroutable = {"file": "a.jsonl", "topic": "cdc", "kafka_partition": 0, "kafka_offset": 1,
                              "reason": "implausible_time", "key_first_bytes": "null", "value_first_bytes": "b'{}'"}
    assert _why_no_window(state, Completeness(), "canal-json") == (
        "the global watermark (watermark: 2026-01-01T00:00:00.010000+00:00) has not reached the end of the "
        "first window with data (2026-01-01T01:00:00+00:00); 1 message(s) not routable as canal-json "
        "(implausible_time: 1): first in file a.jsonl, partition cdc/0, offset 1: first bytes of key null, "
        "of value b'{}'")


def test_a_batch_is_counted_by_one_read_back_and_timeless_messages_join_its_earliest_window(spark, tmp_path):
    """Issue 45: the batch's counts (per partition, window and file, and the window its messages
    without any time join) come from one grouping of its landed rows, not one job each."""
    from cdc_assets.common.spark_session import jobs_since, spark_job_ids
    from cdc_assets.landing.batch_stats import collect_stats
    from cdc_assets.landing.tables import batch_rows

    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    dump.mkdir()
    lines = [row("INSERT", ms_to_tso(T0 + HOUR + 10), values(1, "a")), b"not json at all",
             row("INSERT", ms_to_tso(T0 + 2 * HOUR + 5), values(2, "b")), watermark(ms_to_tso(T0 + 3 * HOUR))]
    (dump / "topic.txt").write_bytes(b"\n".join(lines) + b"\n")
    result = land(spark, dump_root=dump, layout="lines", decoder=get_decoder("canal-json"),
                  warehouse=warehouse, source="src", window_ms=HOUR)

    (batch,) = result.state.batches
    # no time of its own and no Kafka timestamp: the batch's earliest window, where it is quarantined
    assert batch.unroutable_window == T0 + HOUR
    assert result.state.windows == {T0 + HOUR: 2, T0 + 2 * HOUR: 1, T0 + 3 * HOUR: 1}
    assert result.unroutable_files == {"topic.txt": UnroutableFile(4, {"no_time_in_message": 1})}
    assert result.state.first_unroutable["kafka_offset"] == 1

    staged = batch_rows(spark, warehouse, "src", result.batch_id).where(F.col("unroutable_reason").isNull())
    before = spark_job_ids()
    stats = collect_stats(staged, dump, HOUR, LandingState())
    assert jobs_since(before) <= 2  # one action (its exchange is a job of its own under adaptive execution)
    assert (stats.messages, stats.windows, stats.unroutable_window) == (3, {T0 + HOUR: 1, T0 + 2 * HOUR: 1,
                                                                           T0 + 3 * HOUR: 1}, None)
