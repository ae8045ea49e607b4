"""Each layout's plain-Python reader (`sample`, what inspect and detection read) gives the
messages its Spark reader (`read`) gives: same lineage, key and value bytes."""

from __future__ import annotations

import pytest

from cdc_assets.landing.layouts import get_layout
from cdc_assets.simulator import generate


def _spark_rows(spark, layout, root) -> list[tuple]:
    lay = get_layout(layout)
    df = lay.read(spark, lay.list_files(root), root)
    return sorted((r.topic, r.kafka_partition, r.kafka_offset, r.key, r.value) for r in df.collect())


def _python_rows(layout, root) -> list[tuple]:
    lay = get_layout(layout)
    return sorted((m.topic, m.kafka_partition, m.kafka_offset, m.key, m.value)
                  for m in lay.sample(lay.list_files(root), root))


@pytest.mark.parametrize("layout,protocol", [("kafka-parquet", "open-protocol"), ("kcat-jsonl", "dts-avro"),
                                             ("storage-sink", "canal-json")])
def test_sample_reads_what_spark_reads(tmp_path, spark, layout, protocol):
    dump = generate(tmp_path, protocol=protocol, layout=layout, row_changes=40, seed=8)
    if layout == "kcat-jsonl":  # a line that is no record, and binary payloads (Avro)
        next(dump.dump_dir.rglob("*.jsonl")).open("ab").write(b"not a record\xff\r\n")
    python_rows = _python_rows(layout, dump.dump_dir)
    spark_rows = _spark_rows(spark, layout, dump.dump_dir)
    if layout == "kcat-jsonl":  # the pseudo-offset of a line that is no record differs (a hash of its place)
        python_rows = [r if r[1] != -1 else r[:2] + (0,) + r[3:] for r in python_rows]
        spark_rows = [r if r[1] != -1 else r[:2] + (0,) + r[3:] for r in spark_rows]
        assert [r for r in python_rows if r[1] == -1] == [("__unparsed__", -1, 0, None, b"not a record\xff")]
    assert python_rows == spark_rows and len(python_rows) > 40


def test_lines_sample_keeps_exact_bytes_and_line_numbers(tmp_path, spark):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.log").write_bytes(b'{"x":1}\r\n\n  \n\xff\xfe\r\nlast\r')
    assert _python_rows("lines", tmp_path) == _spark_rows(spark, "lines", tmp_path) == [
        ("a/x.log", 0, 0, None, b'{"x":1}'), ("a/x.log", 0, 3, None, b"\xff\xfe"), ("a/x.log", 0, 4, None, b"last")]


@pytest.mark.parametrize("protocol, writer_options", [
    ("open-protocol", {"fmt": "parquet", "store_keys": True}), ("canal-json", {"fmt": "json", "gzip": True}),
    ("dts-avro", {"fmt": "avro", "store_keys": True}),
])
def test_kafka_connect_s3_sample_reads_what_spark_reads(tmp_path, spark, protocol, writer_options):
    dump = generate(tmp_path, protocol=protocol, layout="kafka-connect-s3", row_changes=40, seed=8,
                    writer_options=writer_options)
    python_rows = _python_rows("kafka-connect-s3", dump.dump_dir)
    assert python_rows == _spark_rows(spark, "kafka-connect-s3", dump.dump_dir) and len(python_rows) > 40
