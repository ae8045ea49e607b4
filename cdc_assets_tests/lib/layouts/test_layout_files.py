"""Which files each layout lists, and the exact rows it reads from them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_assets.lib.changelog_schema import REJECT_REASON
from cdc_assets.lib.codecs import get_decoder
from cdc_assets.lib.layouts import UNPARSED_TOPIC, list_dump_files, read_dump


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
             b"garbage", b"garbage", b"", b"\xff{", rec(15, 1).replace(b'"p"', b'"\xff"')]
    f = _write(odd_root, "x/dump.jsonl", b"\n".join(lines) + b"\n")
    rows = read_dump(spark, [f], "kcat-jsonl", odd_root).collect()
    good = sorted((r.kafka_offset, r.kafka_timestamp and r.kafka_timestamp.year, bytes(r.key), bytes(r.value))
                  for r in rows if r.topic == "t")
    assert good == [(10, 2026, b"k", b"p"), (11, None, b"k", b"p"), (12, None, b"k", b"p"),
                    (13, None, b"k", b"p"), (14, None, b"k", b"p")]
    bad = [r for r in rows if r.topic == UNPARSED_TOPIC]
    # Invalid UTF-8 would be replaced by the JSON parser: that record is kept byte for byte, unparsed.
    assert sorted(bytes(r.value) for r in bad) == sorted([b"garbage", b"garbage", b"\xff{", lines[-1]])
    assert {r.kafka_partition for r in bad} == {-1} and len({r.kafka_offset for r in bad}) == 4
    again = read_dump(spark, [f], "kcat-jsonl", odd_root).where(f"topic = '{UNPARSED_TOPIC}'").collect()
    assert {r.kafka_offset for r in again} == {r.kafka_offset for r in bad}


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
