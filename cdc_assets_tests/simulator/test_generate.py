"""End to end: the written dumps, their Kafka semantics, and truth.json against a replay."""

from __future__ import annotations

import base64
import json
from collections import defaultdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_assets.simulator import Transaction, Workload, generate
from cdc_assets.simulator.schema import DEMO_TABLES
from cdc_assets_tests.simulator.dump_reading import kind, replay, truth_rows_by_pk

SPARK_KAFKA_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
HOUR = 3_600_000


def _tree(dump) -> dict[str, bytes]:
    files = sorted(p for p in dump.out_dir.rglob("*") if p.is_file())
    return {str(p.relative_to(dump.out_dir)): p.read_bytes() for p in files}


def test_same_seed_is_byte_identical_and_another_seed_is_not(parquet_dump, tmp_path):
    again = generate(tmp_path / "again")
    assert _tree(again) == _tree(parquet_dump)
    other = generate(tmp_path / "other", seed=8)
    assert other.truth_path.read_bytes() != parquet_dump.truth_path.read_bytes()
    assert _tree(other) != _tree(parquet_dump)


def test_refuses_to_write_over_an_existing_dump(parquet_dump):
    with pytest.raises(FileExistsError):
        generate(parquet_dump.out_dir)


def test_file_layout(parquet_dump, kcat_dump):
    for dump, ext in ((parquet_dump, "parquet"), (kcat_dump, "jsonl")):
        assert dump.dump_dir == dump.out_dir / "dump" and dump.truth_path == dump.out_dir / "truth.json"
        names = [p.relative_to(dump.dump_dir).as_posix() for p in dump.files]
        assert all(n.startswith("tidb_cdc/part-") and n.endswith("." + ext) for n in names)
        assert {n.split("-")[1] for n in names} == {"0", "1", "2"}
        assert len(names) >= 3 * 9  # ~30 min of Kafka time per file over 4.5 h


def test_parquet_has_spark_kafka_source_schema(parquet_dump, records):
    for path in parquet_dump.files:
        assert pq.read_schema(path).remove_metadata() == SPARK_KAFKA_SCHEMA
    t = pq.read_table(parquet_dump.files[0])
    assert set(t.column("topic").to_pylist()) == {"tidb_cdc"} and set(t.column("timestampType").to_pylist()) == {0}
    assert all(r.key is None for r in records)


def test_offsets_are_dense_per_partition_and_files_split_by_time(parquet_dump, records):
    by_p = defaultdict(list)
    for r in records:
        by_p[r.partition].append(r.offset)
    assert sorted(by_p) == [0, 1, 2]
    for offsets in by_p.values():
        assert offsets == list(range(len(offsets)))
    for path in parquet_dump.files:
        ts = pq.read_table(path).column("timestamp").cast(pa.int64()).to_pylist()
        assert len({t // 1000 // 1_800_000 for t in ts}) == 1  # one 30-minute bucket per file
        first = pq.read_table(path).column("offset")[0].as_py()
        assert path.name == f"part-{path.name.split('-')[1]}-{first:020d}.parquet"


def test_kcat_lines_are_kcat_json_with_the_same_messages_as_parquet(kcat_dump, records):
    lines = [line for p in kcat_dump.files for line in p.read_bytes().split(b"\n") if line]
    assert len(lines) == len(records)
    parsed = [json.loads(line) for line in lines]
    for k in parsed:
        assert list(k) == ["topic", "partition", "offset", "tstype", "ts", "broker", "key", "payload"]
        assert (k["topic"], k["tstype"], k["broker"], k["key"]) == ("tidb_cdc", "create", -1, None)
        assert isinstance(json.loads(k["payload"]), dict)
    from_kcat = sorted((k["partition"], k["offset"], k["ts"], k["payload"].encode()) for k in parsed)
    assert from_kcat == [(r.partition, r.offset, r.timestamp_ms, r.value) for r in records]


def test_binary_values_round_trip_to_the_workload_bytes(records):
    original = {}
    tables = {t.full_name: t for t in DEMO_TABLES}
    for e in Workload(seed=7).events():
        if isinstance(e, Transaction):
            for c in e.changes:
                t = tables[f"{c.database}.{c.table}"]
                original[(e.commit_ts, t.full_name, t.pk_values(c.row))] = c.row
    checked, seen_bytes = 0, set()
    for r in records:
        m = r.msg
        if kind(m) != "row":
            continue
        assert b"<" not in r.value and b">" not in r.value and b"&" not in r.value  # Go escapes them
        name = f"{m['database']}.{m['table']}"
        t = tables[name]
        row = m["data"][0]
        pk = tuple(int(row[n]) if t.columns[t.column_names.index(n)].kind in ("int", "uint") else row[n] for n in t.primary_key)
        src = original[(m["_tidb"]["commitTs"], name, pk)]
        for col in t.columns:
            if col.kind == "binary" and row[col.name] is not None:
                decoded = row[col.name].encode("latin-1")
                assert decoded == src[col.name]
                seen_bytes.update(decoded)
                checked += 1
    assert checked > 500 and seen_bytes == set(range(256))


def test_watermarks_are_broadcast_to_every_partition(records, truth):
    partitions_by_ts = defaultdict(set)
    for r in records:
        m = r.msg
        if kind(m) == "watermark":
            assert m["es"] == m["_tidb"]["watermarkTs"] >> 18
            partitions_by_ts[m["_tidb"]["watermarkTs"]].add(r.partition)
    assert len(partitions_by_ts) > 200
    assert all(ps == {0, 1, 2} for ps in partitions_by_ts.values())
    assert sum(kind(r.msg) == "watermark" for r in records) == truth["counts"]["watermarks"]


def test_ddl_goes_to_partition_zero_before_any_row(records, truth):
    ddl = [r for r in records if kind(r.msg) == "ddl"]
    assert {r.partition for r in ddl} == {0} and [r.offset for r in ddl] == list(range(len(ddl)))
    assert len(ddl) == truth["counts"]["ddl"] == 6
    assert [m["type"] for m in (r.msg for r in ddl)] == ["QUERY", "CREATE", "CREATE", "CREATE", "QUERY", "CREATE"]


def test_rows_of_one_key_stay_in_one_partition_in_commit_order(records):
    where, last_ts, seen = {}, {}, set()
    for r in records:  # (partition, offset) order
        m = r.msg
        if kind(m) != "row":
            continue
        row = m["data"][0]
        key = (m["database"], m["table"], tuple(row[n] for n in m["pkNames"]))
        ts = m["_tidb"]["commitTs"]
        assert where.setdefault(key, r.partition) == r.partition
        if (key, ts) not in seen:  # first sends follow commit order; only re-sends go back
            assert ts > last_ts.get(key, 0)
            last_ts[key] = ts
        seen.add((key, ts))


def test_pk_change_is_a_delete_and_an_insert_with_the_same_commit_ts(records):
    by_ts = defaultdict(list)
    for r in records:
        m = r.msg
        if kind(m) == "row":
            by_ts[(m["_tidb"]["commitTs"], m["database"], m["table"])].append(m)
    pairs = 0
    for msgs in by_ts.values():
        for d in (m for m in msgs if m["type"] == "DELETE"):
            old = d["data"][0]
            for i in (m for m in msgs if m["type"] == "INSERT"):
                new = i["data"][0]
                non_key = [c for c in old if c not in d["pkNames"]]
                if all(new[c] == old[c] for c in non_key) and any(new[c] != old[c] for c in d["pkNames"]):
                    pairs += 1
    assert pairs >= 50


def test_restart_produces_late_and_plain_duplicates_as_counted_in_truth(records, truth):
    seen, dup, late, backwards = set(), 0, 0, 0
    wm = {}
    for r in records:
        m = r.msg
        k = kind(m)
        if k == "watermark":
            ts = m["_tidb"]["watermarkTs"]
            if ts < wm.get(r.partition, 0):
                backwards += 1
            wm[r.partition] = max(wm.get(r.partition, 0), ts)
        elif k == "row":
            ident = (m["database"], m["table"], json.dumps(m["data"][0]), m["_tidb"]["commitTs"], m["type"])
            if ident in seen:
                if m["_tidb"]["commitTs"] < wm.get(r.partition, 0):
                    late += 1
                else:
                    dup += 1
            seen.add(ident)
    counts = truth["counts"]
    assert (dup, late) == (counts["duplicates"], counts["late"])
    assert dup >= 24 and late >= 24
    assert backwards >= 3  # the checkpoint re-sent after the restart, in every partition
    assert counts["row_events"] == counts["row_changes"] + dup + late == sum(kind(r.msg) == "row" for r in records)
    restart = truth["restart"]
    assert restart["checkpoint_ts"] < restart["last_watermark_ts"]


def test_windows_are_hourly_and_only_the_last_is_incomplete(records, truth):
    windows = truth["windows"]
    assert [w["end_ms"] - w["start_ms"] for w in windows] == [HOUR] * 5
    assert windows[0]["start_ms"] == 1_767_225_600_000
    assert [w["complete"] for w in windows] == [True, True, True, True, False]
    final = truth["final_watermark_ts"]
    assert windows[-2]["end_ms"] << 18 <= final < windows[-1]["end_ms"] << 18
    for p in (0, 1, 2):  # the last message of every partition is that final watermark
        last = max((r for r in records if r.partition == p), key=lambda r: r.offset).msg
        assert kind(last) == "watermark" and last["_tidb"]["watermarkTs"] == final


def test_naive_replay_matches_truth_in_every_window(records, truth):
    snapshots = replay(records, truth)
    for window, snap in zip(truth["windows"], snapshots, strict=True):
        assert truth_rows_by_pk(truth, window) == snap
    last = truth["windows"][-1]["tables"]
    assert sum(len(rows) for rows in last.values()) > 500


def test_truth_format(truth):
    assert truth["window_ms"] == HOUR and truth["topic"] == "tidb_cdc"
    assert truth["tables"]["shop.order_items"]["primary_key"] == ["order_id", "line_no"]
    assert truth["tables"]["shop.customers"]["types"]["balance"] == "decimal(12,2)"
    assert set(truth["counts"]) >= {"row_events", "watermarks", "ddl", "duplicates", "late"}
    rows = truth["windows"][-1]["tables"]["shop.orders"]
    ids = [int(r[0]) for r in rows]
    assert ids == sorted(ids) and max(ids) > 2**63  # sorted numerically, not as text
    payloads = [r[4] for r in rows if r[4] is not None]
    assert all(base64.b64encode(base64.b64decode(p)).decode() == p for p in payloads)
    assert any(r[4] is None for r in rows)
