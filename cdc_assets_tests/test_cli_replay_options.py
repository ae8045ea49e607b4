"""`cdc-assets replay` builds its source from its flags and the environment (no Spark: the
replay itself is replaced; the end-to-end tests run real ones)."""

from __future__ import annotations

import json

import pytest

import cdc_assets.replay
from cdc_assets.cli import main


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
