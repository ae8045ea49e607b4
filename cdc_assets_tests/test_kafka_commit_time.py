"""Producers that write no event time (Flink CDC's Kafka pipeline sink): with
`commit-time=kafka-timestamp` their events are placed by the Kafka record timestamp and
ordered by partition offset; without it they are quarantined with a hint at the option."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from dagster import AssetKey, DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA, REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.replay import replay
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.store import read_manifest
from cdc_assets_tests.e2e import settings_for
from cdc_assets_tests.helpers import decode

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOUR = 3_600_000
KAFKA = {"commit-time": "kafka-timestamp"}


def flink_canal(op: str, row: dict, old: dict | None = None) -> dict:
    """Flink CDC's pipeline Kafka sink, `value.format: canal-json` (its CanalJsonSerializationSchema):
    no `es`, `ts`, `id`, `mysqlType` or `sqlType`; `old` is the whole before-row."""
    return {"old": [old] if old else None, "data": [row], "type": op, "database": "app", "table": "users",
            "pkNames": ["id"]}


def flink_debezium(op: str, before: dict | None, after: dict | None) -> dict:
    """The same sink with `value.format: debezium-json`: no `ts_ms`, no `source.ts_ms`, no binlog position."""
    return {"before": before, "after": after, "op": op, "source": {"db": "app", "table": "users"}}


def _decoded(spark, protocol: str, messages: list[dict], timestamps: list[int | None], **options):
    ts = [None if t is None else dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc) for t in timestamps]
    rows = [("t", 0, i, ts[i], None, json.dumps(m).encode(), "f") for i, m in enumerate(messages)]
    out = get_decoder(protocol, options).decode(spark.createDataFrame(rows, RAW_MESSAGE_SCHEMA))
    return [r.asDict(recursive=True) for r in out.orderBy("kafka_offset").collect()]


def test_without_the_option_flink_messages_are_quarantined_with_a_hint(spark):
    _, bad = decode(spark, [json.dumps(flink_canal("INSERT", {"id": "1"})).encode()])
    assert [b[REJECT_REASON] for b in bad] == ["missing_commit_ts"]
    assert bad[0][REJECT_DETAIL].endswith("needs the option commit-time=kafka-timestamp")
    _, bad = decode(spark, [json.dumps(flink_debezium("c", None, {"id": 1})).encode()], "debezium-json",
                    **{"primary-key": "id"})
    assert [b[REJECT_REASON] for b in bad] == ["missing_commit_ts"]
    assert bad[0][REJECT_DETAIL] == ("no source.ts_ms or ts_ms; a producer that writes no event time (Flink CDC's "
                                     "Kafka pipeline sink) needs the option commit-time=kafka-timestamp")


def test_debezium_json_takes_the_kafka_timestamp_and_offset(spark):
    messages = [flink_debezium("c", None, {"id": 1, "name": "a"}),
                flink_debezium("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}),
                flink_debezium("d", {"id": 1, "name": "b"}, None)]
    events = _decoded(spark, "debezium-json", messages, [T0 + 5, T0 + 5, None], **KAFKA, **{"primary-key": "id"})
    assert [(e["op"], e["commit_ts"], e["source_position"], e[REJECT_REASON]) for e in events] == [
        ("INSERT", ms_to_tso(T0 + 5), 0, None), ("UPDATE", ms_to_tso(T0 + 5), 1, None),
        ("DELETE", None, 2, "missing_commit_ts")]
    assert events[2][REJECT_DETAIL].startswith("commit-time=kafka-timestamp, but the message has no Kafka timestamp")
    assert events[0]["commit_time"] == dt.datetime.fromtimestamp((T0 + 5) / 1000)  # session time zone: UTC
    assert events[1]["before"] == {"id": "1", "name": "a"} and events[1]["after"] == {"id": "1", "name": "b"}


def test_a_flink_canal_json_dump_replays_in_kafka_order(tmp_path):
    """Two partitions, batch completeness. In partition 0, key 4 is inserted then deleted in one
    millisecond: offset order leaves it deleted (without a position, the tie rule for TiCDC
    would apply the DELETE first)."""
    records = [  # (partition, offset, kafka ms, message)
        (0, 0, T0 + 1000, flink_canal("INSERT", {"id": "1", "name": "a"})),
        (0, 1, T0 + 1000, flink_canal("UPDATE", {"id": "1", "name": "b"}, old={"id": "1", "name": "a"})),
        (0, 2, T0 + 1500, flink_canal("INSERT", {"id": "4", "name": "x"})),
        (0, 3, T0 + 1500, flink_canal("DELETE", {"id": "4", "name": "x"})),
        (1, 0, T0 + 2000, flink_canal("INSERT", {"id": "2", "name": "c"})),
        (0, 4, T0 + HOUR + 5, flink_canal("INSERT", {"id": "3", "name": "d"})),
    ]
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "users.jsonl").write_text("".join(
        json.dumps({"topic": "users", "partition": p, "offset": o, "ts": ts, "key": None,
                    "payload": json.dumps(m)}) + "\n" for p, o, ts, m in records))
    settings = settings_for(tmp_path / "home", dump, layout="kcat-jsonl", options=KAFKA)
    source = dataclasses.replace(settings.sources[0], completeness="batch")
    settings = settings.with_overrides(sources=(source,))
    instance = DagsterInstance.ephemeral()
    summary = replay(settings, "src", instance, progress=lambda _m: None)
    assert (summary.ok, summary.windows, summary.quarantined, summary.events) == (True, 2, 0, 6)
    logged = instance.get_latest_materialization_event(AssetKey(["src", "change_table"]))
    assert logged.asset_materialization.metadata["commit_order"].value == (
        "Kafka record timestamp, then partition offset (commit-time=kafka-timestamp): "
        "a total order within each partition only, none across partitions")

    snapshots = (settings.warehouse, "src")  # (warehouse, source)

    def rows(window_ms: int) -> list[tuple]:
        entry = read_manifest(*snapshots, window_ms).tables["app.users"]
        table = read_entry_arrow(*snapshots, entry).to_pylist()
        return sorted((r["id"], r["name"]) for r in table)

    assert rows(T0) == [("1", "b"), ("2", "c")]
    assert rows(T0 + HOUR) == [("1", "b"), ("2", "c"), ("3", "d")]
