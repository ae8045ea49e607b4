"""The quarantine checks: WARN on anything quarantined, ERROR above the source's rate."""

from __future__ import annotations

import dataclasses

import pytest
from dagster import DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.replay import replay
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.e2e import settings_for
from cdc_assets_tests.helpers import layer_rows

pytestmark = pytest.mark.slow
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _replay_with_rate(tmp_path, rate: float):
    dump = tmp_path / "dump"
    dump.mkdir(parents=True, exist_ok=True)
    good = [row("INSERT", ms_to_tso(T0 + i * 1000), values(i, f"n{i}")) for i in range(1, 4)]
    bad = [b'{"not": "canal"', b"\xff\xfe"]  # invalid JSON, invalid UTF-8
    (dump / "topic.txt").write_bytes(b"\n".join([*good, *bad, watermark(ms_to_tso(T0 + 3_600_000))]) + b"\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    source = dataclasses.replace(settings.sources[0], max_quarantine_rate=rate)
    settings = settings.with_overrides(sources=(source,))
    return replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)


def test_quarantine_above_the_rate_fails_the_error_check(tmp_path):
    summary = _replay_with_rate(tmp_path / "strict", 0.25)  # 2 of 6 messages quarantined
    assert summary.quarantined == 2 and summary.windows == 1
    assert summary.checks_failed == ["src/quarantine:quarantine_rate_within_limit@2026-01-01-00:00"]
    assert not summary.ok

    lenient = _replay_with_rate(tmp_path / "lenient", 0.5)
    assert lenient.quarantined == 2 and lenient.checks_failed == [] and lenient.ok


def test_records_without_a_change_are_quarantined_but_fail_no_check(tmp_path):
    """Canal's XA COMMIT records (the rows came at XA PREPARE) are kept in the quarantine and
    counted, but they are not bad input: neither quarantine check fails on them, whatever
    their share of the messages."""
    dump = tmp_path / "dump"
    dump.mkdir()
    query = b'{"id": 3, "database": "db", "table": "t", "isDdl": false, "type": "XACOMMIT", ' \
            b'"es": 1767225601000, "sql": "", "data": null}'
    good = [row("INSERT", ms_to_tso(T0 + i * 1000), values(i, f"n{i}")) for i in range(1, 3)]
    (dump / "topic.txt").write_bytes(b"\n".join([query, *good, query, watermark(ms_to_tso(T0 + 3_600_000))]) + b"\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    instance = DagsterInstance.ephemeral()
    summary = replay(settings, "src", instance, progress=lambda _m: None)
    assert (summary.quarantined, summary.rows, summary.checks_failed, summary.checks_warned, summary.ok) == (
        2, 2, [], [], True)


def test_quarantine_rows_keep_the_raw_bytes_of_their_message(tmp_path):
    """Rejected by the decoder or by the value conversion after it: either way the
    quarantine row holds the exact message (the decode step keeps raw bytes for rejects only)."""

    dump = tmp_path / "dump"
    dump.mkdir()
    unconvertible = row("INSERT", ms_to_tso(T0 + 5_000), values(9, "n9", big="not-a-number"))
    messages = [row("INSERT", ms_to_tso(T0 + 1_000), values(1, "n1")), b'{"not": "canal"', unconvertible,
                watermark(ms_to_tso(T0 + 3_600_000))]
    (dump / "topic.txt").write_bytes(b"\n".join(messages) + b"\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    source = dataclasses.replace(settings.sources[0], max_quarantine_rate=1.0)
    summary = replay(settings.with_overrides(sources=(source,)), "src", DagsterInstance.ephemeral(),
                     progress=lambda _m: None)
    assert summary.quarantined == 2 and summary.rows == 1

    quarantined = layer_rows(settings.warehouse, "src", "quarantine", ("reason", "value"))
    assert {q["value"] for q in quarantined} == {b'{"not": "canal"', unconvertible}
    assert {q["reason"] for q in quarantined if q["value"] == unconvertible} == {"invalid_value"}
