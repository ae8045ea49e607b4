"""docs/types.md, "Values kept as text": the Debezium logical types with no Spark type of
their own come through as lossless text, with the column type the doc names."""

from __future__ import annotations

import pytest

from cdc_assets.common.mysql_types import parse_mysql_type, spark_type
from cdc_assets.decode.debezium.exact_json import loads_exact
from cdc_assets.decode.debezium.field_schemas import field_facts
from cdc_assets.decode.debezium.values import canonical_values
from pyspark.sql import types as T

CASES = [  # (field schema, value as parsed from the message, column type, change-log text)
    ({"type": "struct", "name": "io.debezium.data.geometry.Geometry"},
     loads_exact('{"wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/", "srid": null}'),
     "geometry", '{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAPA/","srid":null}'),
    ({"type": "struct", "name": "io.debezium.data.geometry.Point"},
     loads_exact('{"x": 1.50, "y": 2, "wkb": "AQ==", "srid": 4326}'), "geometry",
     '{"x":1.5,"y":2,"wkb":"AQ==","srid":4326}'),
    ({"type": "struct", "name": "io.debezium.data.geometry.Geography"}, {"wkb": "AQ==", "srid": 4326},
     "json", '{"wkb":"AQ==","srid":4326}'),
    ({"type": "string", "name": "io.debezium.time.ZonedTime"}, "10:15:30.123456Z", "varchar", "10:15:30.123456Z"),
    ({"type": "string", "name": "io.debezium.time.Interval"}, "P1Y2M3DT4H5M6.78S", "varchar", "P1Y2M3DT4H5M6.78S"),
    ({"type": "int64", "name": "io.debezium.time.MicroDuration"}, 3600000000, "bigint", "3600000000"),
    ({"type": "string", "name": "io.debezium.data.Uuid"}, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "varchar",
     "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    ({"type": "string", "name": "io.debezium.data.Xml"}, "<a/>", "varchar", "<a/>"),
    ({"type": "array", "items": {"type": "int32"}}, [1, 2], "json", "[1,2]"),
    ({"type": "map", "keys": {"type": "string"}, "values": {"type": "string"}}, {"k": "v"}, "json", '{"k":"v"}'),
    ({"type": "string", "name": "io.debezium.data.TiDBVectorFloat32"}, "[1,2.5]", "vector", "[1,2.5]"),
]


@pytest.mark.parametrize(("schema", "value", "column_type", "text"), CASES,
                         ids=[c[0].get("name", c[0]["type"]).rsplit(".", 1)[-1] for c in CASES])
def test_kept_as_text(schema, value, column_type, text):
    rule, scale, typ = field_facts(schema)
    bad: list[str] = []
    assert (typ, canonical_values({"c": value}, {"c": (rule, scale)}, bad), bad) == (column_type, {"c": text}, [])
    expected = T.LongType() if column_type == "bigint" else T.StringType()
    assert spark_type(parse_mysql_type(typ)) == expected
