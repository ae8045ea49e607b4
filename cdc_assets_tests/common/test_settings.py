"""The source configuration file: one set of assets per declared source."""

from __future__ import annotations

import pytest

from cdc_assets.common.settings import load_settings
from cdc_assets.defs.factory import build_definitions, source_builds

SOURCES = """
window_minutes: 30
start: 2026-02-01T00:00
sources:
  - name: tidb_orders
    protocol: canal-json
    location: dumps/orders          # relative to this file
    layout: kafka-parquet
    options: {enable-tidb-extension: true}
    time_zone: Asia/Shanghai
  - name: legacy_mysql
    protocol: canal-json
    location: /data/canal
    options: {enable-tidb-extension: false, content-compatible: true}
    completeness: event-time
    allowed_lateness_seconds: 300
"""


def test_sources_file_declares_every_source(tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text(SOURCES)
    settings = load_settings({"CDC_ASSETS_SOURCES": str(path), "CDC_ASSETS_HOME": str(tmp_path / "h")})
    orders, legacy = settings.sources
    assert (orders.name, orders.input_path, orders.layout, orders.time_zone) == (
        "tidb_orders", str(tmp_path / "dumps" / "orders"), "kafka-parquet", "Asia/Shanghai")
    assert orders.options == {"enable-tidb-extension": "true"}
    assert settings.window_minutes == 30 and settings.partition_start.isoformat() == "2026-02-01T00:00:00+00:00"

    builds = {b.source.name: b for b in source_builds(settings)}
    assert builds["tidb_orders"].completeness().mode == "watermark"
    assert (builds["legacy_mysql"].completeness().mode,
            builds["legacy_mysql"].completeness().allowed_lateness_ms) == ("event-time", 300_000)

    graph = build_definitions(settings).resolve_asset_graph()
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert groups == {"tidb_orders", "legacy_mysql"}
    assert len(graph.get_all_asset_keys()) == 12  # 6 layers x 2 sources


def test_without_extension_canal_json_completes_windows_by_event_time(tmp_path):
    settings = load_settings({"CDC_ASSETS_OPTIONS": "enable-tidb-extension=false"})
    (b,) = source_builds(settings)
    assert b.completeness().mode == "event-time"


def test_an_option_value_may_hold_commas_and_a_bad_primary_key_fails_at_load(tmp_path):
    options = "primary-key=shop.items:order_id,line;id,enable-tidb-extension=false"
    settings = load_settings({"CDC_ASSETS_OPTIONS": options})
    assert settings.sources[0].options == {"primary-key": "shop.items:order_id,line;id",
                                           "enable-tidb-extension": "false"}
    (b,) = source_builds(settings)
    assert b.decoder().key_option.names_for("shop", "items") == ["order_id", "line"]
    with pytest.raises(ValueError, match="not name=value"):
        load_settings({"CDC_ASSETS_OPTIONS": "order_id,line"})
    # only primary-key's value continues past a comma; names and values are stripped
    with pytest.raises(ValueError, match="'enable-tidb-extension' is not name=value"):
        load_settings({"CDC_ASSETS_OPTIONS": "time-zone=UTC,enable-tidb-extension"})
    spaced = load_settings({"CDC_ASSETS_OPTIONS": " enable-tidb-extension = true , primary-key = a , b "})
    assert spaced.sources[0].options == {"enable-tidb-extension": "true", "primary-key": "a,b"}
    for bad, says in [("primary-key=a,,b", "empty column name"), ("enable-tidb-extension=yes", "true or false"),
                      ("time-zone=Mars/Olympus", "is not UTC, an IANA zone")]:
        with pytest.raises(ValueError, match=says):
            source_builds(load_settings({"CDC_ASSETS_OPTIONS": bad}))
    path = tmp_path / "sources.yaml"
    path.write_text("sources:\n  - {name: a, protocol: debezium-json, location: x, options: {primary-key: 'a,,b'}}\n")
    with pytest.raises(ValueError, match="primary-key: an empty column name"):
        build_definitions(load_settings({"CDC_ASSETS_SOURCES": str(path)}))


def test_yaml_option_values_may_be_lists_and_mappings(tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text(
        "sources:\n"
        "  - {name: a, protocol: canal-json, location: x,\n"
        "     options: {primary-key: {shop.items: [order_id, line], shop.orders: id}, enable-tidb-extension: false}}\n"
        "  - {name: b, protocol: debezium-json, location: y, options: {primary-key: [k1, k2]}}\n")
    a, b = source_builds(load_settings({"CDC_ASSETS_SOURCES": str(path)}))
    assert a.source.options == {"primary-key": "shop.items:order_id,line;shop.orders:id",
                                "enable-tidb-extension": "false"}
    assert a.decoder().key_option.names_for("shop", "orders") == ["id"]
    assert b.decoder().key_option.names_for("any", "table") == ["k1", "k2"]


def test_layout_options_from_the_file_or_the_environment_reach_the_layout(tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text(  # YAML's own escapes (double quotes) or the connector's (single quotes)
        "sources:\n"
        "  - {name: a, protocol: canal-json, location: x, layout: kafka-connect-s3,\n"
        "     layout_options: {format.bytearray.separator: \"\\r\\n\"}}\n"
        "  - {name: b, protocol: canal-json, location: y, layout_options: {format.bytearray.separator: '\\u00a6'}}\n")
    a, b = source_builds(load_settings({"CDC_ASSETS_SOURCES": str(path)}))
    assert a.source.layout_options == {"format.bytearray.separator": "\r\n"}
    assert a.dump_layout().separator == b"\r\n"
    assert b.source.layout_options == {"format.bytearray.separator": "\\u00a6"}  # checked once detected
    (env,) = source_builds(load_settings({"CDC_ASSETS_LAYOUT": "kafka-connect-s3",
                                          "CDC_ASSETS_LAYOUT_OPTIONS": r"format.bytearray.separator=\u002c"}))
    assert env.dump_layout().separator == b","
    # an option the layout (or, with auto, any layout) does not know fails when the definitions load
    for layout, known in [("kafka-connect-s3", "known: format.bytearray.separator"), ("lines", "known: none"),
                          ("auto", "known: format.bytearray.separator")]:
        with pytest.raises(ValueError, match=rf"layout {layout}: unknown layout option\(s\) \['separator'\]; {known}"):
            source_builds(load_settings({"CDC_ASSETS_LAYOUT": layout, "CDC_ASSETS_LAYOUT_OPTIONS": "separator=|"}))


def test_unknown_keys_and_duplicate_names_are_rejected(tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text("sources:\n  - {name: a, protocol: canal-json, location: x, colour: red}\n")
    with pytest.raises(ValueError, match="unknown keys"):
        load_settings({"CDC_ASSETS_SOURCES": str(path)})
    path.write_text("sources:\n  - {name: a, protocol: canal-json, location: x}\n"
                    "  - {name: a, protocol: canal-json, location: y}\n")
    with pytest.raises(ValueError, match="unique"):
        load_settings({"CDC_ASSETS_SOURCES": str(path)})


def test_unknown_top_level_keys_are_rejected(tmp_path):
    # A typo of window_minutes would otherwise keep hourly windows without a word.
    path = tmp_path / "sources.yaml"
    path.write_text("window_minute: 30\nsources:\n  - {name: a, protocol: canal-json, location: x}\n")
    with pytest.raises(ValueError, match=r"unknown keys \['window_minute'\]"):
        load_settings({"CDC_ASSETS_SOURCES": str(path)})
    path.write_text("- {name: a, protocol: canal-json, location: x}\n")
    with pytest.raises(ValueError, match="expected a mapping"):
        load_settings({"CDC_ASSETS_SOURCES": str(path)})
    # Every documented key loads.
    path.write_text("window_minutes: 30\nstart: 2026-02-01T00:00\nwarehouse: /tmp/wh\nspark_master: local[1]\n"
                    "spark_conf: {spark.sql.shuffle.partitions: 4}\ns3_endpoint_url: http://minio:9000\n"
                    "s3_region: eu-west-1\nsettle_seconds: 0\nsnapshot_retention_days: 30\n"
                    "sources:\n  - {name: a, protocol: canal-json, location: x}\n")
    settings = load_settings({"CDC_ASSETS_SOURCES": str(path)})
    assert (settings.window_minutes, settings.settle_seconds, settings.snapshot_retention_days) == (30, 0, 30)
    assert load_settings({"CDC_ASSETS_SNAPSHOT_RETENTION_DAYS": "2"}).snapshot_retention_days == 2
    with pytest.raises(ValueError, match="snapshot_retention_days must be 0 or more"):
        load_settings({"CDC_ASSETS_SNAPSHOT_RETENTION_DAYS": "-1"})


def test_s3_locations_spark_and_endpoint_come_from_the_file_and_the_environment(tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text(
        "spark_master: spark://10.0.0.5:7077\n"
        "spark_conf: {spark.executor.memory: 8g, spark.sql.shuffle.partitions: 64}\n"
        "s3_endpoint_url: http://minio:9000\n"
        "sources:\n"
        "  - {name: a, protocol: canal-json, location: s3://dumps/tidb/orders}\n"
        "  - {name: b, protocol: canal-json, location: local/dump}\n"
    )
    settings = load_settings({"CDC_ASSETS_SOURCES": str(path)})
    a, b = settings.sources
    assert (a.input_path, b.input_path) == ("s3://dumps/tidb/orders", str(tmp_path / "local" / "dump"))
    assert settings.spark_master == "spark://10.0.0.5:7077"
    assert settings.spark_conf == {"spark.executor.memory": "8g", "spark.sql.shuffle.partitions": "64"}
    assert (settings.s3_endpoint_url, settings.s3_region) == ("http://minio:9000", None)

    env = load_settings({"CDC_ASSETS_SOURCES": str(path), "CDC_ASSETS_SPARK_MASTER": "sc://connect:15002",
                         "CDC_ASSETS_SPARK_CONF": "spark.sql.shuffle.partitions=16",
                         "CDC_ASSETS_S3_ENDPOINT_URL": "http://127.0.0.1:9000", "CDC_ASSETS_S3_REGION": "eu-west-1"})
    assert env.spark_master == "sc://connect:15002"
    assert env.spark_conf == {"spark.executor.memory": "8g", "spark.sql.shuffle.partitions": "16"}
    assert (env.s3_endpoint_url, env.s3_region) == ("http://127.0.0.1:9000", "eu-west-1")

    plain = load_settings({"CDC_ASSETS_INPUT": "s3://dumps/x"})
    assert plain.sources[0].input_path == "s3://dumps/x" and plain.spark_conf == {}


def test_an_unknown_protocol_layout_or_completeness_fails_when_the_definitions_load(tmp_path):
    (b,) = source_builds(load_settings({"CDC_ASSETS_COMPLETENESS": "batch", "CDC_ASSETS_LAYOUT": "lines"}))
    assert (b.source.completeness, b.source.layout, b.completeness().mode) == ("batch", "lines", "batch")
    for variable, value, says in [
        ("CDC_ASSETS_PROTOCOL", "canal", "source 'sample': unknown protocol 'canal'; known protocols: canal-json"),
        ("CDC_ASSETS_LAYOUT", "parquet", "source 'sample': unknown layout 'parquet'; known: kafka-parquet"),
        ("CDC_ASSETS_COMPLETENESS", "eventtime", "source 'sample': completeness mode 'eventtime' is not one of"),
    ]:
        with pytest.raises(ValueError, match=says):
            source_builds(load_settings({variable: value, "CDC_ASSETS_HOME": str(tmp_path)}))
