"""Round trip: the simulator's TiCDC Debezium dump decodes to the same row events as the
Canal-JSON dump of the same seed, and its checkpoint events are the watermarks."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.landing.layouts import read_dump
from cdc_assets.simulator import generate


def _decoded(spark, dump, protocol):
    raw = read_dump(spark, dump.files, dump.layout, dump.dump_dir)
    decoder = get_decoder(protocol)
    rows = decoder.decode(raw).drop("key", "value").collect()
    routed = decoder.route(raw).select("kafka_partition", "kafka_offset", "watermark_ts").collect()
    return [r.asDict(recursive=True) for r in rows], routed


@pytest.fixture(scope="module")
def dumps(spark, tmp_path_factory):
    debezium = generate(tmp_path_factory.mktemp("dbz"), row_changes=300, protocol="debezium")
    canal = generate(tmp_path_factory.mktemp("canal"), row_changes=300, protocol="canal-json")
    return debezium, _decoded(spark, debezium, "debezium"), _decoded(spark, canal, "canal-json")


def _row_events(events: list[dict]) -> Counter:
    """(table, op, commit_ts, key, after) with DECIMAL compared by value: TiCDC's Debezium
    writes DECIMAL as a float64, so 12.50 arrives as 12.5 (same number, scale not kept)."""
    def normal(after, types):
        if after is None:
            return None
        return tuple(sorted(
            (c, Decimal(v) if v is not None and types[c].startswith("decimal") else v) for c, v in after.items()
        ))

    return Counter(
        (e["database"], e["table"], e["op"], e["commit_ts"], tuple(e["pk_values"]),
         normal(e["after"], e["column_types"]))
        for e in events if e["event_kind"] == "row"
    )


def test_every_message_decodes(dumps):
    dump, (events, _), _ = dumps
    assert [e for e in events if e[REJECT_REASON] is not None] == []
    kinds = Counter(e["event_kind"] for e in events)
    assert kinds == {"row": dump.counts["row_events"], "watermark": dump.counts["watermarks"],
                     "ddl": dump.counts["ddl"]}


def test_same_row_events_as_canal_json(dumps):
    _, (debezium, _), (canal, _) = dumps
    assert _row_events(debezium) == _row_events(canal)
    assert len(_row_events(debezium)) > 250


def test_column_types_and_unsigned_keys(dumps):
    _, (events, _), _ = dumps
    orders = next(e for e in events if e["table"] == "orders" and e["event_kind"] == "row")
    assert orders["column_types"] == {"order_id": "bigint unsigned", "customer_id": "int", "amount": "decimal",
                                      "status": "varchar", "payload": "varbinary", "updated_at": "datetime"}
    # bigint unsigned keys above 2^63-1 come back unwrapped (tidb_type says unsigned).
    assert max(int(e["pk_values"][0]) for e in events if e["table"] == "orders" and e["event_kind"] == "row") > 2**63


def test_checkpoints_are_watermarks_in_every_partition(dumps):
    dump, (events, routed), _ = dumps
    marks = sorted((e["kafka_partition"], e["kafka_offset"], e["watermark_ts"]) for e in events
                   if e["event_kind"] == "watermark")
    assert marks == sorted((r.kafka_partition, r.kafka_offset, r.watermark_ts) for r in routed
                           if r.watermark_ts is not None)
    assert {p for p, _, _ in marks} == {0, 1, 2}
    assert max(ts for _, _, ts in marks) == dump.final_watermark_ts


def test_ddl_reaches_every_partition(dumps):
    _, (events, _), _ = dumps
    ddl = [e for e in events if e["event_kind"] == "ddl"]
    assert {e["kafka_partition"] for e in ddl} == {0, 1, 2}
    creates = {(e["database"], e["table"], e["ddl_type"]) for e in ddl}
    assert ("shop", "orders", "CREATE") in creates and ("shop", None, "CREATE") in creates
    assert all(e["commit_ts"] and e["ddl_sql"] for e in ddl)


def test_route_places_rows_by_commit_time(spark, dumps):
    dump, _, _ = dumps
    raw = read_dump(spark, dump.files, dump.layout, dump.dump_dir)
    decoder = get_decoder("debezium")
    decoded = decoder.decode(raw).where("event_kind = 'row'").select("kafka_partition", "kafka_offset", "commit_ts")
    routed = decoder.route(raw).select("kafka_partition", "kafka_offset", "routing_ms")
    bad = decoded.join(routed, ["kafka_partition", "kafka_offset"], "inner").where(
        F.shiftright("commit_ts", 18) != F.col("routing_ms"))
    assert bad.count() == 0
