"""Files a landing must not read as they are: files still being written (it waits for them)
and data files of a form the layout does not read (it stops with the reason)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_assets.cli import main as cli_main
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.decode import get_decoder
from cdc_assets.landing.land import SETTLE_SECONDS, land
from cdc_assets.landing.tables import load_state
from cdc_assets_tests.canal_messages import row, values, watermark

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _land(spark, dump: Path, warehouse: Path, layout: str):
    return land(spark, dump_root=dump, layout=layout, decoder=get_decoder("canal-json"),
                warehouse=warehouse, source="src", window_ms=HOUR)


def _kafka_parquet(path: Path, offsets: list[int], payloads: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"topic": ["cdc"] * len(offsets), "partition": pa.array([0] * len(offsets), pa.int32()),
                             "offset": pa.array(offsets, pa.int64()), "value": payloads}), path)
    return path


def test_a_parquet_file_without_its_footer_holds_the_landing_until_it_is_whole(spark, tmp_path):
    """Spark's streaming file sink writes its part files in place: a landing can see one
    mid-write. Landing the other files could move the watermark past its messages."""
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    _kafka_parquet(dump / "part-0.parquet", [0, 1], [row("INSERT", ms_to_tso(T0 + 10), values(1, "a")),
                                                    watermark(ms_to_tso(T0 + 2 * HOUR))])
    whole = _kafka_parquet(tmp_path / "whole.parquet", [2], [row("INSERT", ms_to_tso(T0 + 20), values(2, "b"))])
    partial = dump / "part-1.parquet"
    partial.write_bytes(whole.read_bytes()[:-20])  # no footer yet

    waiting = _land(spark, dump, warehouse, "kafka-parquet")
    assert waiting.waiting_files == ["part-1.parquet"]
    assert (waiting.new_files, waiting.messages, waiting.state.partitions) == (0, 0, {})

    partial.write_bytes(whole.read_bytes())
    landed = _land(spark, dump, warehouse, "kafka-parquet")
    assert (landed.waiting_files, landed.new_files, landed.messages) == ([], 2, 3)
    assert landed.state.partitions["cdc/0"].max_offset == 2


def _age(path: Path, seconds: int = SETTLE_SECONDS + 60) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_parquet_file_a_dead_writer_left_without_footer_is_left_out_and_reported(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    _kafka_parquet(dump / "part-0.parquet", [0], [row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))])
    dead = dump / "part-1.parquet"
    dead.write_bytes(b"PAR1 cut short")
    _age(dead)
    first = _land(spark, dump, warehouse, "kafka-parquet")
    assert (first.waiting_files, first.unreadable_files, first.new_files, first.messages) == (
        [], ["part-1.parquet"], 1, 1)
    again = _land(spark, dump, warehouse, "kafka-parquet")  # reported on every landing, never landed
    assert (again.unreadable_files, again.new_files) == (["part-1.parquet"], 0)


def _record(offset: int) -> str:
    return json.dumps({"topic": "cdc", "partition": 0, "offset": offset, "ts": T0, "key": None,
                       "payload": row("INSERT", ms_to_tso(T0 + 10 + offset), values(offset, "a")).decode()},
                      separators=(",", ":"))


def test_a_kcat_file_cut_mid_record_is_waited_for_then_landed_as_it_is_once_it_stops_changing(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    growing = dump / "dump.jsonl"
    growing.parent.mkdir(parents=True)
    growing.write_text(_record(0) + "\n" + _record(1)[:30])  # kcat's buffered output, cut mid-record
    assert _land(spark, dump, warehouse, "kcat-jsonl").waiting_files == ["dump.jsonl"]
    _age(growing)  # kcat was killed: the cut record is quarantined, the rest lands
    landed = _land(spark, dump, warehouse, "kcat-jsonl")
    assert (landed.waiting_files, landed.new_files, landed.messages) == ([], 1, 2)
    assert landed.state.partitions["__unparsed__/-1"].messages == 1
    os.utime(growing)  # touched (or the dump moved): its content is landed, nothing to wait for
    touched = _land(spark, dump, warehouse, "kcat-jsonl")
    assert (touched.waiting_files, touched.new_files, touched.skipped_files) == ([], 0, 1)


def test_kcat_records_glued_without_any_lf_are_whole(spark, tmp_path):
    """kcat -D '': no delimiter at all, the file is one line of records."""
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    (dump / "glued.jsonl").parent.mkdir(parents=True)
    (dump / "glued.jsonl").write_text(_record(0) + _record(1) + _record(2))
    landed = _land(spark, dump, warehouse, "kcat-jsonl")
    assert (landed.waiting_files, landed.new_files, landed.messages) == ([], 1, 3)
    assert landed.state.partitions["cdc/0"].max_offset == 2


def test_storage_sink_csv_files_stop_the_landing_with_the_reason(spark, tmp_path):
    """TiCDC names its data files after the protocol (`.csv` for protocol=csv): leaving them
    out would complete windows without their rows."""
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    tv = ms_to_tso(T0)
    (dump / "hr/employee/meta").mkdir(parents=True)
    (dump / "metadata").write_text(json.dumps({"checkpoint-ts": ms_to_tso(T0 + 3 * HOUR)}))
    (dump / f"hr/employee/meta/schema_{tv}_0123456789.json").write_text(json.dumps(
        {"Table": "employee", "Schema": "hr", "TableVersion": tv, "Type": 3,
         "Query": "CREATE TABLE `employee` (`Id` INT PRIMARY KEY)"}))
    (dump / f"hr/employee/{tv}/meta").mkdir(parents=True)
    (dump / f"hr/employee/{tv}/CDC000001.csv").write_text(f'"I","employee","hr",{tv + 1},101\r\n')
    (dump / f"hr/employee/{tv}/meta/CDC.index").write_text("CDC000001.csv\n")
    with pytest.raises(ValueError, match=r"CDC000001\.csv: a TiCDC storage-sink CSV data file \(protocol=csv\)"):
        _land(spark, dump, warehouse, "storage-sink")
    assert load_state(warehouse, "src").batches == [] and not load_state(warehouse, "src").fingerprints


def test_a_replay_lands_around_a_broken_parquet_file_and_fails(spark, tmp_path, capsys):
    """A replay reads a finished dump: a file without its footer will not become whole, so it
    is left out at once and reported; the rest is materialized; the replay exits 1."""
    dump = tmp_path / "dump"
    _kafka_parquet(dump / "part-0.parquet", [0], [row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))])
    (dump / "part-1.parquet").write_bytes(b"PAR1 cut short")
    code = cli_main(["replay", "--protocol", "canal-json", "--input", str(dump), "--warehouse", str(tmp_path / "wh"),
                     "--source", "src", "--completeness", "batch"])
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == 1 and not summary["ok"]
    assert (summary["files_landed"], summary["windows"], summary["rows"]) == (1, 1, 1)
    assert [c.split("@")[0] for c in summary["checks_warned"]] == ["src/landed_dump:files_complete"]
    assert "1 dump file(s) cut short and unreadable, left out: part-1.parquet (see" in err
