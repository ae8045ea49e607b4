"""`cdc-assets replay` builds its source from its flags and the environment (no Spark: the
replay itself is replaced; the end-to-end tests run real ones)."""

from __future__ import annotations

import json

import pytest

from cdc_assets.cli import main
import cdc_assets.replay


class _Summary:
    ok = True

    def as_json(self):
        return {"ok": True}


@pytest.fixture
def replayed(monkeypatch):
    calls = []
    monkeypatch.setattr(cdc_assets.replay, "default_instance", lambda: None)
    monkeypatch.setattr(cdc_assets.replay, "replay",
                        lambda settings, name, instance: calls.append(settings.source(name)) or _Summary())
    monkeypatch.delenv("CDC_ASSETS_MAX_QUARANTINE_RATE", raising=False)
    monkeypatch.delenv("CDC_ASSETS_SOURCES", raising=False)
    return calls


def _replay(tmp_path, *flags) -> int:
    return main(["replay", "--protocol", "canal-json", "--input", str(tmp_path / "dump"),
                 "--warehouse", str(tmp_path / "wh"), *flags])


def test_max_quarantine_rate_from_the_flag_the_environment_or_the_default(tmp_path, replayed, monkeypatch, capsys):
    assert _replay(tmp_path) == 0
    assert _replay(tmp_path, "--max-quarantine-rate", "0.2") == 0
    monkeypatch.setenv("CDC_ASSETS_MAX_QUARANTINE_RATE", "0.05")
    assert _replay(tmp_path) == 0
    assert _replay(tmp_path, "--max-quarantine-rate", "0") == 0
    assert [s.max_quarantine_rate for s in replayed] == [0.01, 0.2, 0.05, 0.0]
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"ok": True}


def test_a_rate_outside_zero_to_one_is_a_usage_error(tmp_path, replayed, capsys):
    assert _replay(tmp_path, "--max-quarantine-rate", "1.5") == 2
    assert "max_quarantine_rate must be between 0 and 1" in capsys.readouterr().err
    assert replayed == []


def test_protocol_auto_detects_and_says_what_it_chose(tmp_path, replayed, capsys):
    from cdc_assets.simulator import generate

    dump = generate(tmp_path / "sim", protocol="canal-official", layout="kcat-jsonl", row_changes=20, seed=1)
    assert main(["replay", "--protocol", "auto", "--input", str(dump.dump_dir),
                 "--warehouse", str(tmp_path / "wh"), "--option", "time-zone=UTC"]) == 0
    [source] = replayed
    assert (source.protocol, source.layout) == ("canal-json", "kcat-jsonl")
    assert source.options == {"enable-tidb-extension": "false", "content-compatible": "true", "time-zone": "UTC"}
    err = capsys.readouterr().err
    assert "cdc-assets: layout kcat-jsonl (detected: " in err
    assert "protocol canal-json (detected from 26 sampled messages" in err
    assert "variant official Canal" in err


def test_an_explicit_option_wins_over_a_detected_one(tmp_path, replayed, capsys):
    from cdc_assets.simulator import generate

    dump = generate(tmp_path / "sim", protocol="canal-json", layout="kafka-parquet", row_changes=20, seed=1)
    assert main(["replay", "--protocol", "auto", "--layout", "kafka-parquet", "--input", str(dump.dump_dir),
                 "--warehouse", str(tmp_path / "wh"), "--option", "enable-tidb-extension=false"]) == 0
    assert replayed[0].options == {"enable-tidb-extension": "false"}
    assert "layout kafka-parquet (given), protocol canal-json" in capsys.readouterr().err


def test_protocol_auto_on_an_ambiguous_dump_exits_2_naming_the_candidates(tmp_path, replayed, capsys):
    root = tmp_path / "dump"
    root.mkdir()
    (root / "a.log").write_text('{"id":1,"isDdl":false,"type":"INSERT","database":"d","table":"t","es":1,"data":[]}\n'
                                '{"payload":{"op":"c","source":{"db":"d","table":"t","ts_ms":1},"after":{"id":1}}}\n')
    assert main(["replay", "--protocol", "auto", "--input", str(root), "--warehouse", str(tmp_path / "wh")]) == 2
    err = capsys.readouterr().err
    assert "ambiguous dump: its messages are of 2 protocols" in err
    assert "canal-json (1 messages, first at" in err
    assert f"debezium-json (1 messages, first at {root / 'a.log'} partition 0 offset 1)" in err
    assert replayed == []


def test_layout_options_reach_the_source_as_written_and_an_unknown_one_exits_2(tmp_path, replayed, capsys):
    flags = ["--layout", "kafka-connect-s3", "--layout-option", r"format.bytearray.separator=\r\n"]
    assert _replay(tmp_path, *flags) == 0
    assert replayed[0].layout_options == {"format.bytearray.separator": r"\r\n"}  # the layout undoes the escapes
    assert _replay(tmp_path, "--layout", "kafka-connect-s3", "--layout-option", "format.bytearray.seperator=|") == 2
    assert ("layout kafka-connect-s3: unknown layout option(s) ['format.bytearray.seperator']; "
            "known: format.bytearray.separator") in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--layout-option takes key=value, got 'no-equals-sign'"):
        _replay(tmp_path, "--layout", "kafka-connect-s3", "--layout-option", "no-equals-sign")
    assert len(replayed) == 1


def test_layout_options_are_used_to_detect_the_protocol(tmp_path, replayed, capsys):
    from cdc_assets.simulator import generate

    dump = generate(tmp_path / "sim", protocol="canal-json", layout="kafka-connect-s3", row_changes=20, seed=1,
                    writer_options={"fmt": "bin", "separator": "\u00a6|".encode(), "store_keys": False})
    assert main(["replay", "--protocol", "auto", "--input", str(dump.dump_dir), "--warehouse", str(tmp_path / "wh"),
                 "--layout-option", r"format.bytearray.separator=\u00a6|"]) == 0
    assert (replayed[0].protocol, replayed[0].layout) == ("canal-json", "kafka-connect-s3")
    assert r"with layout options format.bytearray.separator='\\u00a6|'" in capsys.readouterr().err
