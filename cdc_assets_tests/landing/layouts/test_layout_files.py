"""Which files each layout lists, and the exact rows it reads from them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.landing.layouts import UNPARSED_TOPIC, detect_layout, get_layout, list_dump_files, read_dump


def _write(root: Path, rel: str, data: bytes = b"x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture()
def odd_root(tmp_path) -> Path:
    # Spark %-encodes ' ' and '%' in file paths and leaves '+': topics must still be plain paths.
    return tmp_path / "dump root+%20"


def _listed(root: Path, layout: str) -> list[str]:
    return [p.relative_to(root).as_posix() for p in list_dump_files(root, layout)]


def test_listing_skips_only_hidden_files_and_spark_bookkeeping(odd_root):
    for rel in ("_prisma_migrations/a.log", "a/_x.log", "a/b.log", ".git/c.log", "a/.d.log",
                "_temporary/0/e.log", "_spark_metadata/f.log", "_committed_1/g.log", "_started_1/h.log",
                "_SUCCESS", "i.log.crc", "j.txt"):
        _write(odd_root, rel)
    assert _listed(odd_root, "lines") == ["_prisma_migrations/a.log", "a/_x.log", "a/b.log", "j.txt"]


def test_storage_sink_lists_cdc_files_outside_the_version_meta_folder(odd_root):
    _write(odd_root, "metadata", b'{"checkpoint-ts": 1}')
    for rel in ("_prisma/_prisma_migrations/1/CDC000001.json", "meta/meta/2/CDC000002.json",
                "db/t/3/7/2026-01-01/CDC000003.json", "db/t/3/7/2026-01-01/meta/CDC.index",
                "db/t/3/meta/schema_3_0.json", "db/t/3/meta/CDC000009.json", "db/meta/schema_3_0.json",
                "db/t/3/CDC.json", "db/t/3/CDCx.json", "db/t/3/CDC1.json.tmp", "db/t/3/.CDC4.json",
                "db/t/3/CDC_7f2a-01_000005.json", "db/t/3/CDC__5.json"):
        _write(odd_root, rel)
    assert _listed(odd_root, "storage-sink") == [
        "_prisma/_prisma_migrations/1/CDC000001.json", "db/t/3/7/2026-01-01/CDC000003.json",
        "db/t/3/CDC_7f2a-01_000005.json", "meta/meta/2/CDC000002.json",
    ]


def test_storage_sink_databases_and_tables_may_have_bookkeeping_names(odd_root):
    """Spark's bookkeeping names (`_temporary`, Databricks' `_started_<txn>`) are skipped
    below a table only: `_started_jobs` or even `_temporary` may be a table's name. Hidden
    names (`.snapshot`) are skipped everywhere."""
    _write(odd_root, "metadata", b'{"checkpoint-ts": 1}')
    for rel in ("app/_temporary/1/CDC000001.json", "app/_started_jobs/1/CDC000001.json",
                "_committed_db/t/1/CDC000001.json", "app/t/1/_temporary/CDC000001.json",
                "app/t/1/_started_5/CDC000001.json", ".snapshot/t/1/CDC000001.json", "app/.trash/1/CDC000001.json"):
        _write(odd_root, rel)
    assert _listed(odd_root, "storage-sink") == [
        "_committed_db/t/1/CDC000001.json", "app/_started_jobs/1/CDC000001.json", "app/_temporary/1/CDC000001.json"]


def test_storage_sink_names_the_data_files_it_does_not_read(odd_root):
    _write(odd_root, "metadata", b'{"checkpoint-ts": 1}')
    for rel in ("db/t/3/CDC000001.csv", "db/t/3/2026-01-01/CDC_1_000002.csv", "db/t/3/CDC000003.json",
                "db/t/3/meta/CDC.index", "db/t/3/meta/CDC000004.csv", "db/t/3/.CDC000005.csv", "db/t/3/notes.csv",
                "db/t/3/CDC000006.json~", "CDC000007.csv", ".git/x/y/CDC000008.csv", "db/t/3/CDC000009.log"):
        _write(odd_root, rel)
    data, refused = get_layout("storage-sink").scan(odd_root)
    assert [p.relative_to(odd_root).as_posix() for p in data] == ["db/t/3/CDC000003.json"]
    assert [p.relative_to(odd_root).as_posix() for p in refused] == [
        "db/t/3/2026-01-01/CDC_1_000002.csv", "db/t/3/CDC000001.csv"]
    assert all("protocol=csv" in reason for reason in refused.values())


def test_storage_sink_without_its_metadata_file_is_detected_by_its_schema_files(tmp_path):
    """One database's folder copied on its own: its lines must not be read as kcat records."""
    _write(tmp_path / "a", "db/t/446266425463046145/CDC000001.json", b'{"id":0}\r\n')
    _write(tmp_path / "a", "db/t/meta/schema_446266425463046145_0123456789.json", b"{}")
    assert detect_layout(tmp_path / "a") == "storage-sink"
    _write(tmp_path / "b", "db/meta/schema_446266425463046145_0123456789.json", b"{}")
    assert detect_layout(tmp_path / "b") == "storage-sink"
    _write(tmp_path / "c", "topic/dump.json", b'{"topic":"t"}\n')
    _write(tmp_path / "c", "topic/meta/schema.json", b"{}")
    assert detect_layout(tmp_path / "c") == "kcat-jsonl"


def test_lines_topics_are_relative_paths_and_values_exact_bytes(odd_root, spark):
    a = _write(odd_root, "a/2026-01-01/events.log", b'{"x":1}\r\n\n  \n\xff\xfe\r\nlast\r')
    b = _write(odd_root, "b/2026-01-02/events.log", b"\xc2\x85\x85\r\r\n")
    rows = read_dump(spark, [a, b], "lines", odd_root).orderBy("topic", "kafka_offset").collect()
    assert [(r.topic, r.kafka_partition, r.kafka_offset, bytes(r.value)) for r in rows] == [
        ("a/2026-01-01/events.log", 0, 0, b'{"x":1}'),
        ("a/2026-01-01/events.log", 0, 3, b"\xff\xfe"),
        ("a/2026-01-01/events.log", 0, 4, b"last"),
        ("b/2026-01-02/events.log", 0, 0, b"\xc2\x85\x85\r"),  # only one trailing CR is the terminator
    ]
    decoded = get_decoder("canal-json", None).decode(read_dump(spark, [a], "lines", odd_root))
    assert {r.kafka_offset: r[REJECT_REASON] for r in decoded.collect()}[3] == "invalid_utf8"


def test_storage_sink_streams_of_underscore_and_meta_tables(odd_root, spark):
    files = [
        _write(odd_root, "_prisma/_prisma_migrations/5/CDC000002.json", b"p0\r\np1\r\n"),
        _write(odd_root, "meta/meta/6/12/2026-01-01/CDC000003.json", b"m0\n"),
        # Never listed, but a stray name must not crash the run (ANSI cast of '').
        _write(odd_root, "db/t/7/CDCx.json", b"z\n"),
        # One table written from two nodes (enable-table-across-nodes): a stream per dispatcher.
        _write(odd_root, "db/t/8/CDC_a1-b2_000002.json", b"d0\n"),
        _write(odd_root, "db/t/8/CDC_c3_d4_000001.json", b"e0\n"),
    ]
    rows = read_dump(spark, files, "storage-sink", odd_root).orderBy("topic", "kafka_offset").collect()
    assert [(r.topic, r.kafka_partition, r.kafka_offset, bytes(r.value)) for r in rows] == [
        ("_prisma/_prisma_migrations/5", 0, (2 << 24) + 0, b"p0"),
        ("_prisma/_prisma_migrations/5", 0, (2 << 24) + 1, b"p1"),
        ("db/t/7", 0, None, b"z"),
        ("db/t/8/CDC_a1-b2", 0, (2 << 24) + 0, b"d0"),
        ("db/t/8/CDC_c3_d4", 0, (1 << 24) + 0, b"e0"),
        ("meta/meta/6/2026-01-01", 12, (3 << 24) + 0, b"m0"),
    ]


def test_kcat_guards_timestamps_and_keeps_garbage_lines_apart(odd_root, spark):
    def rec(offset, ts):
        return json.dumps({"topic": "t", "partition": 1, "offset": offset, "ts": ts, "key": "k",
                           "payload": "p"}).encode()

    lines = [rec(10, 1767225600001), rec(11, 10**17), rec(12, 10**13), rec(13, -5), rec(14, "abc"),
             b"garbage", b"garbage", b"", b"\xff{", rec(15, 1).replace(b'"p"', b'"\xff"'),
             rec(16, 1).replace(b'"p"', b'"\xff\\u0100"')]
    f = _write(odd_root, "x/dump.jsonl", b"\n".join(lines) + b"\n")
    rows = read_dump(spark, [f], "kcat-jsonl", odd_root).collect()
    good = sorted((r.kafka_offset, r.kafka_timestamp and r.kafka_timestamp.year, bytes(r.key), bytes(r.value))
                  for r in rows if r.topic == "t")
    assert good == [(10, 2026, b"k", b"p"), (11, None, b"k", b"p"), (12, None, b"k", b"p"),
                    (13, None, b"k", b"p"), (14, None, b"k", b"p"), (15, 1970, b"k", b"\xff")]
    bad = [r for r in rows if r.topic == UNPARSED_TOPIC]
    # A line read one character per byte (not UTF-8) cannot hold an escape beyond \u00ff.
    assert sorted(bytes(r.value) for r in bad) == sorted([b"garbage", b"garbage", b"\xff{", lines[-1]])
    assert {r.kafka_partition for r in bad} == {-1} and len({r.kafka_offset for r in bad}) == 4
    again = read_dump(spark, [f], "kcat-jsonl", odd_root).where(f"topic = '{UNPARSED_TOPIC}'").collect()
    assert {r.kafka_offset for r in again} == {r.kafka_offset for r in bad}


def test_kcat_keeps_binary_keys_and_payloads_byte_for_byte(odd_root, spark):
    """kcat -J copies key and payload bytes into its JSON string as they are (yajl escapes `"`,
    `\\` and bytes below 0x20), so binary frames (Open Protocol, Avro) come through."""
    payload, key = bytes(range(256)), b"\x00\x01k\xc3\x28\xff"

    def escaped(data: bytes) -> bytes:
        out = bytearray()
        for b in data:
            out += (b"\\" + bytes([b]) if b in b'"\\' else b"\\u%04x" % b if b < 0x20 else bytes([b]))
        return bytes(out)

    line = (b'{"topic":"t","partition":2,"offset":9,"tstype":"create","ts":1767225600001,"broker":1,'
            b'"key":"' + escaped(key) + b'","payload":"' + escaped(payload) + b'"}')
    text = b'{"topic":"t","partition":2,"offset":10,"ts":1767225600001,"key":"\xc3\xa9","payload":"\xe2\x82\xac"}'
    f = _write(odd_root, "x/binary.jsonl", line + b"\n" + text + b"\n")
    rows = read_dump(spark, [f], "kcat-jsonl", odd_root).orderBy("kafka_offset").collect()
    assert [(r.topic, r.kafka_partition, r.kafka_offset, bytes(r.key), bytes(r.value)) for r in rows] == [
        ("t", 2, 9, key, payload), ("t", 2, 10, "é".encode(), "€".encode())]


def test_kcat_records_run_together_on_one_line_are_each_read(odd_root, spark):
    """`cat a.jsonl b.jsonl` where a lacks its last LF, or kcat -D '': JSON would read the
    first record of the line and drop the others."""
    def rec(offset, payload):
        return json.dumps({"topic": "t", "partition": 0, "offset": offset, "ts": 1767225600001,
                           "key": None, "payload": payload}, separators=(",", ":")).encode()

    tricky = 'a}{"topic":1 inside a string'  # escaped quotes: not a record's start
    f = _write(odd_root, "x/glued.jsonl", rec(1, "p1") + rec(2, tricky) + rec(3, "p3") + b'{"topic":\n'
               + rec(4, "p4") + b"\n")
    rows = read_dump(spark, [f], "kcat-jsonl", odd_root).collect()
    good = sorted((r.kafka_offset, bytes(r.value)) for r in rows if r.topic == "t")
    assert good == [(1, b"p1"), (2, tricky.encode()), (3, b"p3"), (4, b"p4")]
    assert [bytes(r.value) for r in rows if r.topic == UNPARSED_TOPIC] == [b'{"topic":']


@pytest.mark.parametrize("tail, whole", [
    (b"", True), (b"\r\n", True), (b'{"topic":"t","offset":3}', True),  # no final LF, still a whole record
    (b'{"topic":"t","off', False), (b"{", False), (b'{"topic":"t","offset":3}{"topic":"t","of', False),
    (b'{"topic":"t","offset":3}{"topic":"t","offset":4}', True),  # kcat -D '': glued, no LF at all
    (b'{"topic":"t","payload":"a}{\\"topic\\":1"', False),  # an escaped boundary is not one
    (b'{"topic":"t","payload":"\xff\xfe"}', True), (b"garbage", True), (b"[1, 2]", True),
])
def test_a_kcat_file_is_whole_unless_it_ends_in_part_of_a_record(tmp_path, tail, whole):
    f = _write(tmp_path, "x.jsonl", b'{"topic":"t","offset":1}\n{"topic":"t","offset":2}\n' + tail)
    assert get_layout("kcat-jsonl").is_complete(f) is whole


def test_kafka_parquet_files_with_different_columns_keep_their_own_values(odd_root, spark):
    """A file under `partition=0/` without a partition column next to a backfill file with
    one, and a pandas export with int64 partitions and string keys: each file's own columns
    and types count, not the first file's (nor does Spark's schema merging fail on them)."""
    files = [
        _kafka_parquet(odd_root / "partition=0/part-0.parquet", value=[b"a"], offset=pa.array([5], pa.int64())),
        _kafka_parquet(odd_root / "backfill/part-1.parquet", value=[b"b", b"c"], offset=pa.array([5, 6], pa.int64()),
                       partition=pa.array([1, 1], pa.int32()), key=[b"k", None]),
        _kafka_parquet(odd_root / "export/part-2.parquet", value=[b"d"], offset=pa.array([7], pa.int64()),
                       partition=pa.array([1], pa.int64()), key=["s"]),
    ]
    rows = read_dump(spark, files, "kafka-parquet", odd_root).orderBy("kafka_partition", "kafka_offset").collect()
    assert [(r.kafka_partition, r.kafka_offset, r.key and bytes(r.key), bytes(r.value)) for r in rows] == [
        (0, 5, None, b"a"), (1, 5, b"k", b"b"), (1, 6, None, b"c"), (1, 7, b"s", b"d")]


def _kafka_parquet(path: Path, **columns) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def test_kafka_parquet_written_with_partition_by_topic_and_partition(odd_root, spark):
    """`df.write.partitionBy("topic", "partition")`: those columns are folder names (Spark
    %-escapes special characters in them), not in the files; key and timestamp left out too."""
    files = [
        _kafka_parquet(odd_root / f"topic=orders%3Av2/partition={p}/part-0.parquet",
                       value=[b"v%d" % p], offset=pa.array([7 + p], pa.int64()))
        for p in (0, 3)
    ]
    rows = read_dump(spark, files, "kafka-parquet", odd_root).orderBy("kafka_offset").collect()
    assert [(r.topic, r.kafka_partition, r.kafka_offset, r.key, r.kafka_timestamp, bytes(r.value)) for r in rows] == [
        ("orders:v2", 0, 7, None, None, b"v0"), ("orders:v2", 3, 10, None, None, b"v3")]
    # No topic column and no topic= folder: the dump is one topic (dated folders hold one
    # partition's offsets); a partition= folder that is not a number is a stream of its own.
    plain = [_kafka_parquet(odd_root / f"2026-01-0{d}/part-1.parquet", value=[b"w"], offset=pa.array([d], pa.int64()))
             for d in (1, 2)]
    odd = _kafka_parquet(odd_root / "partition=p1/part-2.parquet", value=[b"w"], offset=pa.array([3], pa.int64()))
    rows = read_dump(spark, [*plain, odd], "kafka-parquet", odd_root).orderBy("kafka_offset").collect()
    assert [(r.topic, r.kafka_partition, r.kafka_offset) for r in rows] == [
        (odd_root.name, 0, 1), (odd_root.name, 0, 2), (f"{odd_root.name}/partition=p1", 0, 3)]
    with pytest.raises(ValueError, match="no value column"):
        read_dump(spark, [_kafka_parquet(odd_root / "x/part.parquet", payload=[b"p"], offset=[1])],
                  "kafka-parquet", odd_root)
