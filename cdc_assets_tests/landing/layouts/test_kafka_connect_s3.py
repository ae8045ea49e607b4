"""Kafka Connect S3 sink objects (Confluent's S3SinkConnector): names, formats, keys, detection,
and a simulated dump written the way the connector writes it, replayed against the truth."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path, PurePath

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from cdc_assets.decode import get_decoder
from cdc_assets.landing.land import land
from cdc_assets.landing.layouts import check_layout_options, detect_layout, get_layout, list_dump_files, read_dump
from cdc_assets.landing.layouts.kafka_connect_s3 import SEPARATOR, parse_name
from cdc_assets.replay import replay
from cdc_assets.simulator import generate
from cdc_assets_tests.e2e import differences_from_truth, settings_for

HOUR = 3_600_000
LAYOUT = "kafka-connect-s3"


def test_names_of_the_default_and_time_based_partitioners_are_parsed():
    assert parse_name("tidb.cdc_v1+2+0000001200.json") == {
        "topic": "tidb.cdc_v1", "partition": 2, "start_offset": 1200, "keys": False, "format": ".json", "gzip": False}
    assert parse_name("orders+0+0000000000.keys.bin.gz") == {
        "topic": "orders", "partition": 0, "start_offset": 0, "keys": True, "format": ".bin", "gzip": True}
    assert parse_name("orders+11+00000000000000000042.snappy.parquet")["start_offset"] == 42
    assert parse_name("orders+3+0000000007.avro")["format"] == ".avro"
    # not read: headers, other formats, Spark's and the simulator's own part files
    for name in ("orders+0+0000000000.headers.json", "orders+0+0000000000.csv", "orders+0+0000000000.avro.gz",
                 "part-0-00000000000000000000.parquet", "part-00000-1b2c.c000.snappy.parquet", "orders.json"):
        assert parse_name(name) is None, name
    layout = get_layout(LAYOUT)
    # default partitioner, time-based partitioner (path.format), a topics.dir of its own
    for path in ("topics/orders/partition=0/orders+0+0000000000.json",
                 "topics/orders/year=2026/month=01/day=02/hour=03/orders+0+0000000000.json",
                 "cdc/raw/orders/dt=2026-01-02/orders+0+0000000000.json.gz"):
        assert layout.is_data_file(PurePath(path)), path
    assert not layout.is_data_file(PurePath("topics/orders/partition=0/.orders+0+0000000000.json"))
    assert "format cdc_assets does not read" in layout.unsupported(PurePath("topics/o/partition=0/o+0+0000000000.csv"))
    assert layout.unsupported(PurePath("topics/o/partition=0/o+0+0000000000.headers.avro")) is None


def _put(root: Path, name: str, content: bytes, folder: str = "topics/t/partition=1") -> None:
    path = root / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def _rows(spark, root: Path, options: dict[str, str] | None = None):
    files = list_dump_files(root, LAYOUT)
    rows = read_dump(spark, files, LAYOUT, root, options).orderBy("kafka_offset").collect()
    return [(r.topic, r.kafka_partition, r.kafka_offset, r.key, r.value) for r in rows]


def test_json_format_values_base64_text_and_documents_with_their_keys(spark, tmp_path):
    frame = b"\x00\x01\n\xff binary \r\n"  # bytes a line separator would cut: safe as base64
    doc = {"type": "INSERT", "data": [{"id": "1"}]}
    values = [json.dumps(base64.b64encode(frame).decode()), json.dumps('{"id":1}'), json.dumps(doc), "null"]
    _put(tmp_path, "t+1+0000000040.json", "".join(v + "\n" for v in values).encode())
    keys = [json.dumps(base64.b64encode(b"k%d" % i).decode()) for i in range(4)]
    _put(tmp_path, "t+1+0000000040.keys.json", "".join(k + "\n" for k in keys).encode())
    assert _rows(spark, tmp_path) == [
        ("t", 1, 40, b"k0", frame),
        ("t", 1, 41, b"k1", b'{"id":1}'),
        ("t", 1, 42, b"k2", json.dumps(doc).encode()),
        ("t", 1, 43, b"k3", None),
    ]


def test_bytearray_format_lf_crlf_and_gzip_without_keys(spark, tmp_path):
    _put(tmp_path, "t+1+0000000000.bin", b'{"a":1}\n{"a":2}\n')
    _put(tmp_path, "t+1+0000000002.bin.gz", gzip.compress(b'{"a":3}\r\n{"a":4}\r\n'))
    assert _rows(spark, tmp_path) == [("t", 1, i, None, b'{"a":%d}' % (i + 1)) for i in range(4)]


# Values of binary protocols hold LF and CR (why a user sets another separator); the blank one
# is a value too, exactly as written, and the empty one has nothing to read (its offset is
# still counted).
_BYTEARRAY_VALUES = [b'{"a":1}\n{"a":2}', b"\x00\x01\r\xff frame \n", b"  ", b"", b'{"a":3}']
# (the option as a user writes it, escapes included; the bytes the connector writes)
_SEPARATORS = [("|", b"|"), (r"\r\n", b"\r\n"), ("\r\n", b"\r\n"), (r"\u00a6\u2192", "\u00a6\u2192".encode()),
               ("<<END>>", b"<<END>>"), (r"\\", b"\\")]


def _connector_bytearray(values: list[bytes], separator: bytes) -> bytes:
    """ByteArrayFormat as the connector writes an object: each value's bytes, then the separator."""
    return b"".join(v + separator for v in values)


def _put_bytearray(root: Path, separator: bytes, gz: bool = False) -> None:
    ext = ".bin.gz" if gz else ".bin"
    pack = gzip.compress if gz else (lambda b: b)
    _put(root, f"t+1+0000000020{ext}", pack(_connector_bytearray(_BYTEARRAY_VALUES, separator)))
    keys = [b"k%d" % k for k in range(len(_BYTEARRAY_VALUES))]
    _put(root, f"t+1+0000000020.keys{ext}", pack(_connector_bytearray(keys, separator)))


def _expected_bytearray() -> list[tuple]:
    return [("t", 1, 20 + k, b"k%d" % k, v) for k, v in enumerate(_BYTEARRAY_VALUES) if v]


@pytest.mark.parametrize("option, separator", _SEPARATORS)
def test_bytearray_format_with_the_connectors_separator_read_back_exactly(tmp_path, option, separator):
    _put_bytearray(tmp_path, separator)
    layout = get_layout(LAYOUT, {SEPARATOR: option})
    assert layout.separator == separator
    files = layout.list_files(tmp_path)
    got = [(m.topic, m.kafka_partition, m.kafka_offset, m.key, m.value) for m in layout.sample(files, tmp_path)]
    assert got == _expected_bytearray()


@pytest.mark.parametrize("option, separator, gz", [("|", b"|", False), (r"\u00a6\u2192", "\u00a6\u2192".encode(), True)])
def test_bytearray_format_with_the_connectors_separator_in_spark(spark, tmp_path, option, separator, gz):
    _put_bytearray(tmp_path, separator, gz)
    assert _rows(spark, tmp_path, {SEPARATOR: option}) == _expected_bytearray()


def test_landing_reads_bytearray_objects_with_the_sources_separator(spark, tmp_path):
    dump = generate(tmp_path / "sim", seed=5, layout=LAYOUT, row_changes=60,
                    writer_options={"fmt": "bin", "separator": b"\r\n|", "store_keys": False})
    landed = land(spark, dump_root=dump.dump_dir, layout=LAYOUT, layout_options={SEPARATOR: r"\r\n|"},
                  decoder=get_decoder("canal-json"), warehouse=tmp_path / "warehouse", source="src", window_ms=HOUR)
    objects = list_dump_files(dump.dump_dir, LAYOUT)
    assert landed.messages == sum(len(p.read_bytes().split(b"\r\n|")) - 1 for p in objects) > len(objects)
    assert landed.unroutable_files == {}


def test_bytearray_separator_defaults_to_the_line_separator(tmp_path):
    layout = get_layout(LAYOUT)
    assert layout.options == {SEPARATOR: "\n"} and layout.separator == b"\n"
    _put(tmp_path, "t+1+0000000000.bin", b'{"a":1}\r\n{"a":2}\n')  # a Windows worker's CRLF reads too
    assert [m.value for m in layout.sample(layout.list_files(tmp_path), tmp_path)] == [b'{"a":1}', b'{"a":2}']


def test_an_unknown_or_empty_layout_option_is_an_error_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"layout kafka-connect-s3: unknown layout option\(s\) "
                                         r"\['format.bytearray.seperator'\]; known: format.bytearray.separator"):
        get_layout(LAYOUT, {"format.bytearray.seperator": "|"})
    with pytest.raises(ValueError, match=r"layout kcat-jsonl: unknown layout option\(s\) \['x'\]; known: none"):
        get_layout("kcat-jsonl", {"x": "1"})
    with pytest.raises(ValueError, match=r"layout auto: unknown layout option\(s\) \['x'\]; known: "
                                         "format.bytearray.separator"):
        check_layout_options("auto", {"x": "1"})
    check_layout_options("auto", {SEPARATOR: "|"})  # the detected layout checks it when read
    with pytest.raises(ValueError, match="format.bytearray.separator is empty"):
        get_layout(LAYOUT, {SEPARATOR: ""})
    with pytest.raises(ValueError, match=r"unknown escape '\\\\q'"):
        get_layout(LAYOUT, {SEPARATOR: r"\q"})


_UNREADABLE = [("t+1+0000000020.bin.gz", b"not gzip", "BadGzipFile"),
               ("t+1+0000000020.json.gz", gzip.compress(b'"eA=="\n' * 50, mtime=0)[:-12], "EOFError"),
               ("t+1+0000000020.avro", b"not avro", "ValueError")]


def _names_the_object(root: Path, name: str, error: str) -> str:
    return (f"{root / 'topics/t/partition=1' / name}: cannot read this Kafka Connect S3 object "
            f"(topic t, partition 1, records from offset 20): {error}")


@pytest.mark.parametrize("name, content, error", _UNREADABLE)
def test_an_unreadable_object_is_an_error_naming_it_its_partition_and_offset(tmp_path, name, content, error):
    _put(tmp_path, name, content)
    layout = get_layout(LAYOUT)
    with pytest.raises(ValueError) as raised:
        list(layout.sample(layout.list_files(tmp_path), tmp_path))
    assert str(raised.value).startswith(_names_the_object(tmp_path, name, error))


@pytest.mark.parametrize("name, content, error", [_UNREADABLE[0], _UNREADABLE[2]])
def test_an_unreadable_object_stops_the_landing_naming_it(spark, tmp_path, name, content, error):
    dump = tmp_path / "dump"
    _put(dump, name, content)
    with pytest.raises(ValueError) as raised:  # the executor's error, without Spark's traceback
        land(spark, dump_root=dump, layout=LAYOUT, decoder=get_decoder("canal-json"),
             warehouse=tmp_path / "warehouse", source="src", window_ms=HOUR)
    assert str(raised.value).startswith(f"cannot land the {LAYOUT} files under {dump}: "
                                        + _names_the_object(dump, name, error))


def test_parquet_and_avro_records_with_their_keys(spark, tmp_path):
    import fastavro
    import pyarrow as pa

    pq.write_table(pa.table({"value": pa.array([b"v0", b"v1"], pa.binary())}),
                   tmp_path / "p.parquet")
    _put(tmp_path, "t+1+0000000010.snappy.parquet", (tmp_path / "p.parquet").read_bytes())
    # keys: the connector envelopes them in a RecordKey record with one field, `key`
    pq.write_table(pa.table({"key": pa.array(["k0", "k1"], pa.string())}), tmp_path / "k.parquet")
    _put(tmp_path, "t+1+0000000010.keys.snappy.parquet", (tmp_path / "k.parquet").read_bytes())
    (tmp_path / "p.parquet").unlink(), (tmp_path / "k.parquet").unlink()
    with (tmp_path / "a.avro").open("wb") as f:
        fastavro.writer(f, fastavro.parse_schema("string"), ['{"a":1}', '{"a":2}'])
    _put(tmp_path, "t+1+0000000012.avro", (tmp_path / "a.avro").read_bytes())
    (tmp_path / "a.avro").unlink()
    # a record of several fields: its JSON text
    pq.write_table(pa.table({"op": ["c"], "id": [7]}), tmp_path / "r.parquet")
    _put(tmp_path, "t+1+0000000014.parquet", (tmp_path / "r.parquet").read_bytes())
    (tmp_path / "r.parquet").unlink()
    assert _rows(spark, tmp_path) == [
        ("t", 1, 10, b"k0", b"v0"), ("t", 1, 11, b"k1", b"v1"),
        ("t", 1, 12, None, b'{"a":1}'), ("t", 1, 13, None, b'{"a":2}'),
        ("t", 1, 14, None, b'{"op":"c","id":7}'),
    ]


def test_detected_over_the_layouts_that_share_its_extensions(tmp_path):
    _put(tmp_path, "t+1+0000000000.json", b"null\n")
    _put(tmp_path, "t+1+0000000000.keys.json", b"null\n")
    assert detect_layout(tmp_path) == LAYOUT
    (tmp_path / "other.jsonl").write_bytes(b"{}\n")  # a kcat file too: ambiguous, never a guess
    with pytest.raises(ValueError, match="cannot detect the dump layout"):
        detect_layout(tmp_path)


def test_values_object_waits_for_its_keys_object_when_the_folder_has_keys(tmp_path):
    layout = get_layout(LAYOUT)
    _put(tmp_path, "t+1+0000000000.json", b"null\n")
    _put(tmp_path, "t+1+0000000000.keys.json", b"null\n")
    _put(tmp_path, "t+1+0000000001.json", b"null\n")
    folder = tmp_path / "topics/t/partition=1"
    assert layout.is_complete(folder / "t+1+0000000000.json")
    assert not layout.is_complete(folder / "t+1+0000000001.json")
    _put(tmp_path, "t+1+0000000001.keys.json", b"null\n")
    assert layout.is_complete(folder / "t+1+0000000001.json")


@pytest.mark.parametrize("protocol, writer_options", [
    ("canal-json", {"fmt": "json", "flush_size": 150}),
    ("open-protocol", {"fmt": "parquet", "flush_size": 150}),  # binary frames, keys needed
])
def test_replay_of_connector_objects_equals_the_truth(spark, tmp_path, protocol, writer_options):
    dump = generate(tmp_path / "sim", seed=5, layout=LAYOUT, protocol=protocol, row_changes=400,
                    duration_ms=int(2.5 * HOUR), writer_options=writer_options)
    assert detect_layout(dump.dump_dir) == LAYOUT
    settings = settings_for(tmp_path / "home", dump.dump_dir, protocol=protocol)
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.windows >= 2
    assert differences_from_truth(settings, dump.truth_path) == {}


def test_s3_mirror_wants_values_and_keys_objects_not_headers():
    from cdc_assets.landing.input_files import wanted_object

    wanted = wanted_object(LAYOUT)
    folder = "topics/t/partition=0/"
    assert wanted(PurePath(folder + "t+0+0000000000.json.gz"))
    assert wanted(PurePath(folder + "t+0+0000000000.keys.json.gz"))
    assert wanted(PurePath(folder + "t+0+0000000000.csv"))  # mirrored so that the landing names it
    # a named layout mirrors every object that is not hidden (the landing names what it skips)
    assert wanted(PurePath(folder + "t+0+0000000000.headers.json.gz"))
    assert not wanted_object("auto")(PurePath(folder + "t+0+0000000000.headers.json.gz"))
    assert wanted_object("auto")(PurePath(folder + "t+0+0000000000.keys.avro"))
