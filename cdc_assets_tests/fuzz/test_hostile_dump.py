"""Hostile messages mixed into a simulated dump (hypothesis picks which, and where): each is
quarantined exactly once with its reason, and every window still equals the truth.

The messages are what a broken producer writes: a real row message of the dump with one thing
wrong (an absurd commit time, a name of the wrong JSON type or one no table can have, bytes
that are not JSON), put in the partition just before a real message (offsets move up)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from dagster import DagsterInstance
from hypothesis import HealthCheck, given, settings as hyp_settings, strategies as st

from cdc_assets.common.settings import SourceConfig, load_settings
from cdc_assets.replay import replay
from cdc_assets.simulator import generate
from cdc_assets.simulator.kafka import KafkaMessage
from cdc_assets_tests.e2e import differences_from_truth
from cdc_assets_tests.helpers import layer_rows

pytestmark = pytest.mark.slow

HOUR = 3_600_000
START_MS = 1_767_225_600_000
YEAR_2500_TSO = 16_725_225_600_000 << 18


def _with(m: dict, **changes) -> bytes:
    return json.dumps({**m, **changes}).encode()


def _tidb(m: dict, commit_ts) -> bytes:
    return _with(m, _tidb={**m["_tidb"], "commitTs": commit_ts})


# kind -> (how a Canal-JSON row message is broken, the reason it must be quarantined with)
KINDS = {
    "commit_ts_zero": (lambda m: _tidb(m, 0), "implausible_commit_ts"),
    "commit_ts_negative": (lambda m: _tidb(m, -1), "implausible_commit_ts"),
    "commit_ts_year_2500": (lambda m: _tidb(m, YEAR_2500_TSO), "implausible_commit_ts"),
    "table_name_too_long": (lambda m: _with(m, table="t" * 300), "invalid_table_name"),
    "table_name_of_10000": (lambda m: _with(m, table="表" * 10_000), "invalid_table_name"),
    "table_is_a_number": (lambda m: _with(m, table=123), "unexpected_shape"),
    "table_is_an_array": (lambda m: _with(m, table=[m["table"]]), "unexpected_shape"),
    "database_is_an_object": (lambda m: _with(m, database={"a": 1}), "unexpected_shape"),
    "not_json": (lambda m: json.dumps(m).encode()[:-7], "invalid_json"),
    "no_value": (lambda m: b"", "empty_message"),
}


def _row_message(msg: KafkaMessage) -> dict | None:
    m = json.loads(msg.value)
    return m if not m.get("isDdl") and m.get("type") in ("INSERT", "UPDATE", "DELETE") else None


@hyp_settings(max_examples=2, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=st.lists(st.tuples(st.integers(0, 150), st.sampled_from(sorted(KINDS))), min_size=3, max_size=12,
                     unique_by=lambda p: p[0]))
def test_hostile_messages_are_quarantined_once_and_windows_equal_the_truth(tmp_path_factory, spark, plan):
    tmp = tmp_path_factory.mktemp("hostile")
    where = dict(plan)  # the n-th row message of the first window -> the kind put before it
    seen = [0]

    def inject(msg: KafkaMessage):
        m = _row_message(msg)
        if m is None or m["_tidb"]["commitTs"] >> 18 >= START_MS + HOUR:  # complete windows only
            return []
        n, seen[0] = seen[0], seen[0] + 1
        return [(msg.key, KINDS[where[n]][0](m))] if n in where else []

    dump = generate(tmp / "sim", seed=31, row_changes=600, duration_ms=int(2.5 * HOUR), inject=inject)
    injected = Counter(KINDS[kind][1] for n, kind in plan if n < seen[0])
    assert dump.counts["injected"] == sum(injected.values()) > 0

    base = load_settings({"CDC_ASSETS_HOME": str(tmp / "home")})
    source = SourceConfig(name="src", protocol="canal-json", input_path=str(dump.dump_dir), max_quarantine_rate=1.0)
    settings = base.with_overrides(sources=(source,))
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)

    assert summary.ok, summary.checks_failed
    assert summary.quarantined == sum(injected.values())  # one quarantine row per message
    by_reason = Counter()
    for row in layer_rows(settings.warehouse, "src", "quarantine", ("reason",)):
        by_reason[row["reason"]] += 1
    assert by_reason == injected
    assert differences_from_truth(settings, dump.truth_path) == {}
