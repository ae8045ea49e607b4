"""A source's protocol, layout and completeness are the registries' enums once checked; a name
no registry has fails naming the source and the known names."""

from __future__ import annotations

import pytest

from cdc_assets.common.settings import SourceConfig
from cdc_assets.decode import DECODERS, Protocol
from cdc_assets.landing.layouts import LAYOUTS, Layout, detect_layout
from cdc_assets.landing.source_config import checked_source
from cdc_assets.landing.state import CompletenessMode


def test_the_enums_are_the_registries_names():
    assert sorted(Protocol) == sorted(DECODERS) and Protocol.CANAL_JSON == "canal-json"
    assert tuple(Layout) == LAYOUTS and f"{Layout.KAFKA_CONNECT_S3}" == "kafka-connect-s3"


def test_a_checked_source_holds_enums_and_auto_stays_auto():
    source = checked_source(SourceConfig("a", "debezium-json", "x", layout="kcat-jsonl", completeness="batch"))
    assert (source.protocol, source.layout, source.completeness) == (
        Protocol.DEBEZIUM_JSON, Layout.KCAT_JSONL, CompletenessMode.BATCH)
    assert type(source.protocol) is Protocol and type(source.completeness) is CompletenessMode
    auto = checked_source(SourceConfig("a", "canal-json", "x"))
    assert (auto.protocol, auto.layout, auto.completeness) == (Protocol.CANAL_JSON, "auto", "auto")
    assert checked_source(source) == source  # checking twice changes nothing


@pytest.mark.parametrize("changes, says", [
    ({"protocol": "canal"}, "source 'a': unknown protocol 'canal'; known protocols: canal-json, cloudcanal-json, "
                            "debezium, debezium-json, dts-avro, open-protocol"),
    ({"layout": "parquet"}, "source 'a': unknown layout 'parquet'; known: kafka-parquet, kcat-jsonl, lines, "
                            "storage-sink, kafka-connect-s3"),
    ({"completeness": "eventtime"}, "source 'a': completeness mode 'eventtime' is not one of "
                                    "('watermark', 'event-time', 'batch')"),
])
def test_an_unknown_name_fails_naming_the_source_and_the_known_ones(changes, says):
    with pytest.raises(ValueError) as error:
        checked_source(SourceConfig(**{"name": "a", "protocol": "canal-json", "input_path": "x", **changes}))
    assert str(error.value) == says


def test_a_detected_layout_is_the_enum(tmp_path):
    (tmp_path / "part-0.jsonl").write_text('{"topic": "t", "partition": 0, "offset": 0, "payload": "{}"}\n')
    assert detect_layout(tmp_path) is Layout.KCAT_JSONL
