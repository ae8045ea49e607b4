"""Plain line files and TiCDC storage-sink folders, replayed end to end through Dagster."""

from __future__ import annotations

import json

import pytest

from cdc_assets.cli import main as cli_main
from cdc_assets.landing.layouts import detect_layout, list_dump_files, read_dump
from cdc_assets.snapshot.store import list_manifests, read_manifest

MCCC = "pingcap+ticdc/extracted/mccc_decoder_test.DataContent{}.ticdc-canal-json.crlf.txt"
TXN = "pingcap+tiflow/extracted/canal_json_txn_event_decoder_test.TestCanalJSONBatchDecoderWithTerminator.canal-json.txt"


@pytest.fixture()
def storage_sink(tmp_path, conformance):
    root = tmp_path / "sink"
    for n, table in ((1, "message"), (2, "message2")):
        folder = root / "test_active" / table / "464043256649875456"
        folder.mkdir(parents=True)
        (folder / "CDC000001.json").write_bytes((conformance / MCCC.format(n)).read_bytes())
        (folder / "meta").mkdir()
        (folder / "meta" / "CDC.index").write_text("CDC000001.json\n")
        # The table's definition when the changefeed started: no statement, so not an event.
        definition = {"Table": table, "Schema": "test_active", "Version": 1, "TableVersion": 464043256649875456,
                      "Query": "", "Type": 0, "TableColumns": [{"ColumnName": "id", "ColumnType": "INT"}],
                      "TableColumnsTotal": 1}
        (folder.parent / "meta").mkdir()
        (folder.parent / "meta" / "schema_464043256649875456_0123456789.json").write_text(json.dumps(definition))
    checkpoint = (1770344427851 + 86_400_000) << 18
    (root / "metadata").write_text(json.dumps({"checkpoint-ts": checkpoint}))
    return root


def test_storage_sink_is_detected_and_read_with_stream_lineage(storage_sink, spark):
    assert detect_layout(storage_sink) == "storage-sink"
    files = list_dump_files(storage_sink, "storage-sink")
    assert [f.relative_to(storage_sink).as_posix() for f in files] == [
        "test_active/message/464043256649875456/CDC000001.json",
        "test_active/message/meta/schema_464043256649875456_0123456789.json",
        "test_active/message2/464043256649875456/CDC000001.json",
        "test_active/message2/meta/schema_464043256649875456_0123456789.json",
    ]
    rows = read_dump(spark, files, "storage-sink", storage_sink).orderBy("topic", "kafka_offset").collect()
    assert [r.topic for r in rows] == ["test_active/message/464043256649875456"] * 8 + [
        "test_active/message2/464043256649875456"] * 2
    assert [r.kafka_offset for r in rows[:3]] == [(1 << 24) + 0, (1 << 24) + 1, (1 << 24) + 2]
    assert {r.kafka_partition for r in rows} == {0}


def _replay(argv, capsys):
    code = cli_main(argv)
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _tables(warehouse, source):
    snapshots = (warehouse, source)
    manifest = read_manifest(*snapshots, list_manifests(*snapshots)[-1])
    return {f"{t.database}.{t.table}": t.rows for t in manifest.tables.values()}


def test_storage_sink_replays_to_the_final_table_state(storage_sink, tmp_path, capsys, spark):
    warehouse = tmp_path / "wh"
    code, summary = _replay(["replay", "--protocol", "canal-json", "--input", str(storage_sink),
                             "--warehouse", str(warehouse), "--source", "sink", "--window-minutes", "1440"],
                            capsys)
    assert code == 0 and summary["quarantined"] == 0 and summary["windows"] == 3
    # ORACLES.md §1.1: ids 20, 21, 5, 6, 7, 8 in `message`; (100,a), (101,b) in `message2`.
    assert _tables(warehouse, "sink") == {"test_active.message": 6, "test_active.message2": 2}


def test_lines_layout_in_batch_mode(tmp_path, conformance, capsys, spark):
    dump = tmp_path / "lines"
    dump.mkdir()
    (dump / "employee.txt").write_bytes((conformance / TXN).read_bytes())
    warehouse = tmp_path / "wh"
    # No watermark in these messages: only the batch mode (the dump is complete) closes windows.
    # Written without the TiDB extension (no `_tidb`): declared, so `es` is the commit time.
    code, summary = _replay(["replay", "--protocol", "canal-json", "--input", str(dump),
                             "--warehouse", str(warehouse), "--source", "txn", "--completeness", "batch",
                             "--option", "enable-tidb-extension=false"],
                            capsys)
    assert code == 0 and summary["events"] == 3 and summary["windows"] == 1
    # INSERT, UPDATE, DELETE of id 101 (ORACLES.md §1.3, derived): the table ends empty.
    assert _tables(warehouse, "txn") == {"test.employee": 0}
