"""Layout and protocol detection and `cdc-assets inspect` (plain Python, no Spark): on dumps the
simulator writes (every protocol and layout) and on real messages of the conformance corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_assets.cli import main
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.decode import get_decoder
from cdc_assets.landing.detect import detect_protocol
from cdc_assets.landing.inspect_dump import detection_sample, inspect_dump, resolve
from cdc_assets.landing.layouts import detect_layout, get_layout
from cdc_assets.simulator import generate
from cdc_assets.simulator.protocols import ENCODERS
from cdc_assets_tests.decode.test_large_messages import compress

FLINK = "apache+flink/flink-formats/flink-json/src/test/resources"
TICDC_DEBEZIUM = "pingcap+ticdc/extracted/debezium_codec_test"
TIFLOW_OPEN = "pingcap+tiflow/examples/java/src/test/resources/data"
PAIMON_INSERT = "apache+paimon/paimon-flink/paimon-flink-cdc/src/test/resources/kafka/canal/table/event/event-insert.txt"
TIFLOW_CANAL = ("pingcap+tiflow/extracted/"
                "canal_json_txn_event_decoder_test.TestCanalJSONBatchDecoderWithTerminator.canal-json.txt")

CASES = [(p, "kcat-jsonl") for p in sorted(ENCODERS)] + [
    (p, "kafka-parquet") for p in sorted(ENCODERS)] + [("canal-json", "storage-sink")]


def _inspect(*argv: str, capsys) -> tuple[int, str, str]:
    code = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("protocol,layout", CASES)
def test_detection_picks_the_simulated_protocol_layout_and_options(tmp_path, protocol, layout):
    dump = generate(tmp_path, protocol=protocol, layout=layout, row_changes=40, seed=3)
    resolved = resolve(dump.dump_dir)
    assert resolved.layout == layout
    expected_protocol, expected_options = ENCODERS[protocol].decoder
    assert resolved.protocol == expected_protocol
    # the decoder the detection configures is the one the simulator's messages are read with
    assert get_decoder(resolved.protocol, resolved.options).options == get_decoder(
        expected_protocol, expected_options).options


@pytest.mark.parametrize("protocol,layout", [("canal-json", "kafka-parquet"), ("open-protocol", "kcat-jsonl"),
                                             ("debezium", "kcat-jsonl"), ("dts-avro", "kafka-parquet"),
                                             ("canal-official", "kcat-jsonl"), ("canal-json", "storage-sink")])
def test_inspect_json_reports_offsets_watermarks_and_complete_windows(tmp_path, capsys, protocol, layout):
    dump = generate(tmp_path, protocol=protocol, layout=layout, row_changes=60, seed=5)
    code, out, _ = _inspect("--input", str(dump.dump_dir), "--json", capsys=capsys)
    assert code == 0
    report = json.loads(out)
    assert report["layout"]["name"] == layout and report["protocol"]["detected"]
    assert report["rejects"] == {}
    if layout != "storage-sink":  # the storage sink keeps rows and DDL only, no watermark messages
        assert report["messages"] == dump.counts["messages"]
        assert [(p["topic"], p["partition"], p["min_offset"]) for p in report["partitions"]] == [
            ("tidb_cdc", 0, 0), ("tidb_cdc", 1, 0), ("tidb_cdc", 2, 0)]
        assert sum(p["max_offset"] + 1 for p in report["partitions"]) == dump.counts["messages"]
    # every window with data is complete exactly when the simulator says so
    truth = {w["start_ms"]: w["complete"] for w in dump.windows}
    starts = [w["start"] for w in report["windows"]]
    assert [w["complete"] for w in report["windows"]] == [
        truth[int(_ms(s))] for s in starts]
    assert report["complete_windows"] == sum(truth[int(_ms(s))] for s in starts) > 0
    incomplete = [w for w in report["windows"] if not w["complete"]]
    assert incomplete and all(w["blocked_by"] for w in incomplete)
    if ENCODERS[protocol].decoder[0] in ("canal-json", "open-protocol", "debezium") and protocol != "canal-official":
        assert report["completeness"] == "watermark"
        assert {p["last_watermark_ts"] for p in report["partitions"]} == {dump.final_watermark_ts}
        assert report["global_watermark_ts"] == dump.final_watermark_ts
        assert all("watermark at" in b for w in incomplete for b in w["blocked_by"])
    else:
        assert report["completeness"] == "event-time"
        assert all(p["last_watermark_ts"] is None for p in report["partitions"])
    tables = {t["table"]: t for t in report["tables"]}
    assert set(tables) == {"shop.customers", "shop.orders", "shop.order_items", "inventory.stock"}
    assert sorted(tables["shop.order_items"]["key"]) == ["line_no", "order_id"]
    assert tables["shop.customers"]["key"] == ["id"] and "balance" in tables["shop.customers"]["columns"]
    assert sum(t["row_events"] for t in tables.values()) >= dump.counts["row_events"] - dump.counts["resent"]
    assert f"--protocol {ENCODERS[protocol].decoder[0]}" in report["replay_command"]
    assert f"--layout {layout}" in report["replay_command"]


def _ms(iso: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def test_inspect_text_names_what_blocks_a_window(tmp_path, capsys):
    dump = generate(tmp_path, protocol="canal-json", layout="kcat-jsonl", row_changes=30, seed=2)
    code, out, _ = _inspect("--input", str(dump.dump_dir), capsys=capsys)
    assert code == 0
    assert "protocol:    canal-json (detected from" in out and "variant TiCDC with the TiDB extension" in out
    assert "tidb_cdc [0]  offsets 0.." in out
    assert "waiting: tidb_cdc partition 0, tidb_cdc partition 1, tidb_cdc partition 2: watermark at" in out
    assert "cdc-assets replay --protocol canal-json --input" in out


def test_a_partition_without_watermark_blocks_every_window(tmp_path):
    """Watermarks dropped from one partition: nothing completes, and the report says why."""
    dump = generate(tmp_path, protocol="canal-json", layout="kcat-jsonl", row_changes=30, seed=2)
    for f in dump.dump_dir.rglob("part-1-*.jsonl"):
        lines = [line for line in f.read_text().splitlines() if "TIDB_WATERMARK" not in line]
        f.write_text("\n".join(lines) + "\n")
    report = inspect_dump(dump.dump_dir)
    assert report["complete_windows"] == 0 and report["global_watermark_ts"] is None
    assert {p["partition"]: p["last_watermark_ts"] for p in report["partitions"]} == {
        0: dump.final_watermark_ts, 1: None, 2: dump.final_watermark_ts}
    assert all(w["blocked_by"] == ["tidb_cdc partition 1: no watermark yet"] for w in report["windows"][:-1])
    assert report["windows"][-1]["blocked_by"] == [  # the last window waits for the others too
        "tidb_cdc partition 0, tidb_cdc partition 2: watermark at 2026-01-01T04:23:01.525Z",
        "tidb_cdc partition 1: no watermark yet"]


def _lines_dump(tmp_path: Path, conformance: Path, *files: str) -> Path:
    root = tmp_path / "dump"
    root.mkdir()
    for i, f in enumerate(files):
        shutil.copy(conformance / f, root / f"{i}-{Path(f).stem}.txt")
    return root


@pytest.mark.parametrize("files,protocol,options,facts", [
    ([f"{FLINK}/canal-data.txt"], "canal-json", {"enable-tidb-extension": "false", "content-compatible": "true"},
     {"variant": "official Canal"}),
    ([PAIMON_INSERT], "canal-json", {"enable-tidb-extension": "false", "content-compatible": "true"},
     {"variant": "official Canal"}),
    (["pingcap+ticdc/extracted/mccc_decoder_test.DataContent1.ticdc-canal-json.crlf.txt"], "canal-json",
     {"enable-tidb-extension": "true"}, {"variant": "TiCDC with the TiDB extension"}),
    ([TIFLOW_CANAL],
     "canal-json", {"enable-tidb-extension": "false"}, {"variant": "TiCDC without the TiDB extension"}),
    ([f"{FLINK}/debezium-data-schema-include.txt"], "debezium-json", {}, {"schema": "on"}),
    ([f"{FLINK}/debezium-data-schema-exclude.txt"], "debezium-json", {}, {"schema": "off"}),
])
def test_conformance_messages_are_detected(tmp_path, conformance, files, protocol, options, facts):
    root = _lines_dump(tmp_path, conformance, *files)
    resolved = resolve(root)
    assert resolved.layout == "lines" and resolved.protocol == protocol and resolved.options == options
    assert facts.items() <= resolved.detection.facts.items()


def test_paimon_license_header_lines_are_counted_not_candidates(tmp_path, conformance):
    root = _lines_dump(tmp_path, conformance, PAIMON_INSERT)
    d = resolve(root).detection
    assert d.protocol == "canal-json" and d.unrecognised > 0 and "partition 0 offset 0" in d.first_unrecognised


def _kcat(path: Path, records: list[tuple[bytes | None, bytes]]) -> None:
    lines = [json.dumps({"topic": "t", "partition": 0, "offset": i, "ts": 1767225600000 + i,
                         "key": None if k is None else k.decode("latin-1"), "payload": v.decode("latin-1")})
             for i, (k, v) in enumerate(records)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def test_ticdc_debezium_messages_schema_on_and_off(tmp_path, conformance):
    def compact(name: str) -> bytes:
        return json.dumps(json.loads((conformance / TICDC_DEBEZIUM / name).read_text())).encode()

    for n, schema, disable in (("1", "off", "true"), ("2", "on", "false")):
        root = tmp_path / n
        key, value = compact(f"TestEncodeInsert.{n}.key.json"), compact(f"TestEncodeInsert.{n}.value.json")
        _kcat(root / "t.jsonl", [(key, value)])
        resolved = resolve(root)
        assert (resolved.layout, resolved.protocol) == ("kcat-jsonl", "debezium")
        assert resolved.options == {"enable-tidb-extension": "false", "debezium-disable-schema": disable}
        assert resolved.detection.facts["schema"] == schema


def test_tiflow_open_protocol_frames_in_kafka_parquet(tmp_path, conformance):
    """The Java example's binary key / value frames, as Spark's Kafka source writes them."""
    data = conformance / TIFLOW_OPEN
    names = ["ddl_0", "row_0", "row_1", "rts_0"]
    keys = [(data / "key" / f"{n.split('_')[0]}_key_{n.split('_')[1]}").read_bytes() for n in names]
    values = [(data / "value" / f"{n.split('_')[0]}_value_{n.split('_')[1]}").read_bytes() for n in names]
    root = tmp_path / "dump"
    root.mkdir()
    pq.write_table(pa.table({"key": keys, "value": values, "topic": ["t"] * 4, "partition": [0] * 4,
                             "offset": list(range(4))}), root / "part-0.parquet")
    resolved = resolve(root)
    assert (resolved.layout, resolved.protocol, resolved.options) == ("kafka-parquet", "open-protocol", {})
    report = inspect_dump(root)
    assert report["partitions"][0]["min_offset"] == 0 and report["partitions"][0]["max_offset"] == 3
    assert report["partitions"][0]["last_watermark_ts"] is not None


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_compressed_canal_json_values_are_detected(tmp_path, codec):
    plain = json.dumps({"id": 0, "database": "d", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
                        "es": 1767225600000, "ts": 1767225600001, "data": [{"id": "1"}],
                        "mysqlType": {"id": "int"}, "_tidb": {"commitTs": ms_to_tso(1767225600000)}}).encode()
    root = tmp_path / "dump"
    root.mkdir()
    pq.write_table(pa.table({"value": [compress(plain, codec)], "offset": [7]}), root / "a.parquet")
    resolved = resolve(root)
    assert resolved.protocol == "canal-json"
    assert resolved.options == {"large-message-handle-compression": codec, "enable-tidb-extension": "true"}
    assert resolved.detection.facts["compression"] == codec
    report = inspect_dump(root)
    assert report["tables"] == [{"table": "d.t", "key": ["id"], "columns": {"id": "int"}, "row_events": 1, "ddl": 0}]
    assert report["partitions"][0] == {
        "topic": "dump", "partition": 0, "messages": 1, "min_offset": 7, "max_offset": 7,
        "first_commit_ts": ms_to_tso(1767225600000), "first_commit_time": "2026-01-01T00:00:00.000Z",
        "last_commit_ts": ms_to_tso(1767225600000), "last_commit_time": "2026-01-01T00:00:00.000Z",
        "last_watermark_ts": None, "last_watermark_time": None}


def test_handle_key_only_messages_show_the_large_message_handling(tmp_path):
    msg = {"id": 0, "database": "d", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "UPDATE",
           "es": 1767225600000, "ts": 1767225600001, "data": [{"id": "1"}], "mysqlType": {"id": "int"},
           "_tidb": {"commitTs": ms_to_tso(1767225600000), "onlyHandleKey": True}}
    root = tmp_path / "dump"
    root.mkdir()
    (root / "a.log").write_text(json.dumps(msg) + "\n")
    assert resolve(root).detection.facts["large-message-handle-option"] == "handle-key-only"
    rejects = inspect_dump(root)["rejects"]
    assert rejects["handle_key_only"]["count"] == 1 and rejects["handle_key_only"]["first"].endswith(
        "a.log partition 0 offset 0")


def test_messages_of_two_protocols_are_an_error_naming_both(tmp_path, conformance, capsys):
    root = _lines_dump(tmp_path, conformance, f"{FLINK}/canal-data.txt", f"{FLINK}/debezium-data-schema-exclude.txt")
    with pytest.raises(ValueError, match=r"ambiguous dump: its messages are of 2 protocols") as e:
        resolve(root)
    assert "canal-json (" in str(e.value) and "debezium-json (" in str(e.value)
    assert "0-canal-data.txt partition 0 offset 0" in str(e.value)
    code, out, err = _inspect("--input", str(root), capsys=capsys)
    assert code == 2 and out == "" and "canal-json" in err and "debezium-json" in err


def test_files_of_two_layouts_are_an_error_naming_both(tmp_path, capsys):
    dump = generate(tmp_path, protocol="canal-json", layout="kafka-parquet", row_changes=20, seed=1)
    (dump.dump_dir / "tidb_cdc" / "notes.log").write_text('{"isDdl":false}\n')
    with pytest.raises(ValueError, match=r"looks like 2 layouts \(kafka-parquet: .*; lines: 1 .*\)"):
        detect_layout(dump.dump_dir)
    code, _, err = _inspect("--input", str(dump.dump_dir), capsys=capsys)
    assert code == 2 and "kafka-parquet" in err and "lines" in err
    # the layout named explicitly: no guessing needed
    code, out, _ = _inspect("--input", str(dump.dump_dir), "--layout", "kafka-parquet", "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["layout"] == {"name": "kafka-parquet", "why": "given", "options": {}}


def test_no_message_of_a_known_protocol_is_an_error_with_the_first_bytes(tmp_path):
    root = tmp_path / "dump"
    root.mkdir()
    (root / "a.log").write_bytes(b"hello world\nstill not cdc\n")
    with pytest.raises(ValueError, match=r"none of 2 sampled messages .*a.log partition 0 offset 0: first bytes b'h"):
        resolve(root)


def test_the_sample_reads_the_first_messages_of_every_file(tmp_path):
    dump = generate(tmp_path, protocol="open-protocol", layout="kcat-jsonl", row_changes=30, seed=4)
    layout = get_layout("kcat-jsonl")
    files = layout.list_files(dump.dump_dir)
    sample = detection_sample(layout, files, dump.dump_dir)
    assert {m.source_file for m in sample} == {str(f) for f in files}
    assert detect_protocol(sample).protocol == "open-protocol"


def test_inspect_reads_a_dump_on_s3(tmp_path, capsys, monkeypatch):
    """The prefix is mirrored into a temporary folder (as replay mirrors it) and inspected."""
    import boto3

    from cdc_assets_tests.servers import moto_s3

    dump = generate(tmp_path / "sim", protocol="open-protocol", layout="kafka-parquet", row_changes=30, seed=6)
    local = inspect_dump(dump.dump_dir)
    with moto_s3(tmp_path) as endpoint:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTKEY")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
        monkeypatch.setenv("CDC_ASSETS_S3_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("CDC_ASSETS_S3_REGION", "us-east-1")
        monkeypatch.delenv("CDC_ASSETS_SOURCES", raising=False)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="cdc")
        for path in dump.files:
            client.upload_file(str(path), "cdc", f"dumps/op/{path.relative_to(dump.dump_dir).as_posix()}")
        code, out, _ = _inspect("--input", "s3://cdc/dumps/op", "--json", capsys=capsys)
    assert code == 0
    report = json.loads(out)
    assert report["input"] == "s3://cdc/dumps/op" and report["protocol"]["name"] == "open-protocol"
    assert report["partitions"] == local["partitions"] and report["windows"] == local["windows"]
    assert report["replay_command"] == ("cdc-assets replay --protocol open-protocol --input s3://cdc/dumps/op "
                                        "--warehouse WAREHOUSE_DIR --layout kafka-parquet")


def test_open_protocol_claim_check_keys_show_the_large_message_handling(tmp_path):
    def frame(obj: dict) -> bytes:
        data = json.dumps(obj).encode()
        return len(data).to_bytes(8, "big") + data

    ts = ms_to_tso(1767225600000)
    key = (1).to_bytes(8, "big") + frame({"ts": ts, "scm": "d", "tbl": "t", "t": 1, "ccl": "s3://bucket/claim/1"})
    value = frame({"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}}})
    root = tmp_path / "dump"
    root.mkdir()
    pq.write_table(pa.table({"key": [key], "value": [value], "offset": [0]}), root / "p.parquet")
    d = resolve(root).detection
    assert (d.protocol, d.facts["large-message-handle-option"]) == ("open-protocol", "claim-check")
    assert inspect_dump(root)["rejects"]["claim_check_not_supported"]["count"] == 1


def test_inspect_reads_bytearray_objects_with_the_given_separator(tmp_path, capsys):
    dump = generate(tmp_path, protocol="canal-json", layout="kafka-connect-s3", row_changes=20, seed=1,
                    writer_options={"fmt": "bin", "separator": "\u00a6|".encode(), "store_keys": False})
    option = r"format.bytearray.separator=\u00a6|"
    # without it, each object is one message of no known protocol: an error naming the first
    code, _, err = _inspect("--input", str(dump.dump_dir), capsys=capsys)
    assert code == 2 and "tidb_cdc+0+0000000000.bin partition 0 offset 0" in err
    code, out, _ = _inspect("--input", str(dump.dump_dir), "--json", "--layout-option", option, capsys=capsys)
    report = json.loads(out)
    assert code == 0 and report["protocol"]["name"] == "canal-json"
    assert report["layout"]["options"] == {"format.bytearray.separator": r"\u00a6|"}
    assert report["messages"] == sum(p["max_offset"] + 1 for p in report["partitions"]) > 3
    assert f"--layout-option '{option}'" in report["replay_command"]
    code, _, err = _inspect("--input", str(dump.dump_dir), "--layout-option", "separator=|", capsys=capsys)
    assert code == 2 and "unknown layout option(s) ['separator']; known: format.bytearray.separator" in err


def test_inspect_names_the_line_that_is_no_record_and_the_file_it_cannot_read(tmp_path, capsys):
    dump = generate(tmp_path / "kcat", protocol="canal-json", layout="kcat-jsonl", row_changes=20, seed=1)
    path = sorted(dump.dump_dir.rglob("*.jsonl"))[0]
    lines = path.read_bytes().count(b"\n")
    path.write_bytes(path.read_bytes() + b"not a record\n")
    rejects = inspect_dump(dump.dump_dir)["rejects"]
    assert rejects["not_a_record"]["first"] == f"{path} line {lines + 1} (not a record of the layout)"

    root = tmp_path / "parquet"
    root.mkdir()
    (root / "part-0.parquet").write_bytes(b"PAR1 cut short")
    code, _, err = _inspect("--input", str(root), "--protocol", "canal-json", capsys=capsys)
    assert code == 2 and f"{root / 'part-0.parquet'}: not a readable Parquet file" in err
