"""Issue 45: the landing parses each JSON message once to route it. Fields read straight off
one `from_json` were each given their own parse by Spark's JSON optimisation: six parses of
every Canal-JSON message, about half of the landing's job. The routes now read a column of
the parsed struct (`spark_helpers.with_parsed_value`)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.decode import get_decoder
from cdc_assets.landing.routing import landed_rows, routed_messages
from cdc_assets_tests.canal_messages import row, values, watermark

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _debezium(op: str, commit_ms: int) -> bytes:
    source = {"commit_ts": ms_to_tso(commit_ms), "ts_ms": commit_ms - 5}
    return json.dumps({"payload": {"op": op, "ts_ms": commit_ms + 7, "source": source}}).encode()


def _cloudcanal(entry_type: str, exec_ms: int) -> bytes:
    return json.dumps({"entryType": entry_type, "execTs": exec_ms, "data": [{"id": "1"}]}).encode()


# protocol, options, a row message routed at T0 + 10, a watermark message at T0 + HOUR
CASES = {
    "canal-json": ({}, row("INSERT", ms_to_tso(T0 + 10), values(1, "a")), watermark(ms_to_tso(T0 + HOUR))),
    "debezium": ({}, _debezium("c", T0 + 10), _debezium("m", T0 + HOUR)),
    "cloudcanal-json": ({"transaction-end-as-watermark": "true"}, _cloudcanal("ROWDATA", T0 + 10),
                        _cloudcanal("TRANSACTIONEND", T0 + HOUR)),
}


@pytest.mark.parametrize("protocol", sorted(CASES))
def test_the_landing_parses_each_message_once_and_routes_it(spark, protocol):
    options, change, mark = CASES[protocol]
    kafka_time = dt.datetime(2026, 1, 1, 5, 0)  # not the messages' time: the protocol's time wins
    raw = spark.createDataFrame(
        [("cdc", 0, offset, kafka_time, None, value, "file:/dump/part-0.parquet")
         for offset, value in enumerate([change, mark])], RAW_MESSAGE_SCHEMA)
    landed = landed_rows(routed_messages(get_decoder(protocol, options), raw, 0), HOUR)

    plan = landed._jdf.queryExecution().executedPlan().toString()
    assert plan.count("from_json(") == 1, plan
    got = sorted((r.kafka_offset, r.routing_ms, r.watermark_ts, r.window_start_ms, r.unroutable_reason)
                 for r in landed.collect())
    assert got == [(0, T0 + 10, None, T0, None), (1, T0 + HOUR, ms_to_tso(T0 + HOUR), T0 + HOUR, None)]
