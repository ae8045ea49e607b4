"""Golden type-fidelity matrix: protocol x MySQL type x edge value -> the exact Spark value.

For every protocol, the simulator's encoder writes one INSERT per (column type, value) of
`matrix.MATRIX` as the real producer would; the protocol's decoder reads them; the
change-log values go through `value_conversion` (as the change_log asset does) and are
typed with `mysql_types` exactly as the snapshot layer types them (including the data-driven
scale of decimals declared without parameters). The collected Python values must equal the
matrix's, bit for bit for floats. One decode job and one typing job per protocol.
"""

from __future__ import annotations

import re
import struct
from datetime import datetime, timezone

import pytest
from pyspark.sql import functions as F, types as T

from cdc_assets.common.mysql_types import is_decimal_without_params, parse_mysql_type, spark_type, typed_value
from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.value_conversion import quarantine_unconvertible_values
from cdc_assets.simulator.canal_json import CanalJsonEncoder
from cdc_assets.simulator.canal_official import CanalOfficialEncoder
from cdc_assets.simulator.cloudcanal_json import CloudCanalJsonEncoder
from cdc_assets.simulator.debezium import DebeziumEncoder, DebeziumMySqlEncoder
from cdc_assets.simulator.dts_avro import DtsAvroEncoder
from cdc_assets.simulator.open_protocol import OpenProtocolEncoder
from cdc_assets.simulator.schema import ColumnDef, TableDef
from cdc_assets.simulator.tso import make_tso
from cdc_assets.simulator.workload import INSERT, RowChange
from cdc_assets_tests.decode.types.matrix import MATRIX, WALL_CLOCK_TIMESTAMP, expected_for
from cdc_assets_tests.helpers import raw_frame

DATABASE = "types"
PROTOCOLS = {  # matrix name -> encoder class (its `decoder` names the decoder and options)
    "canal-json": CanalJsonEncoder,
    "open-protocol": OpenProtocolEncoder,
    "debezium": DebeziumEncoder,
    "debezium-json": DebeziumMySqlEncoder,
    "cloudcanal-json": CloudCanalJsonEncoder,
    "canal-official": CanalOfficialEncoder,
    "dts-avro": DtsAvroEncoder,
}
# A zone with DST: TIMESTAMP text in the repeated hour is ambiguous (see matrix).
TIME_ZONE = "America/New_York"


def table_name(i: int) -> str:
    return f"t{i:02d}"


def tables() -> list[TableDef]:
    return [
        TableDef(DATABASE, table_name(i), (ColumnDef("id", "int", primary_key=True),
                                          ColumnDef("v", c.mysql_type, nullable=True)))
        for i, c in enumerate(MATRIX)
    ]


def messages(protocol: str, time_zone: str, only: str = "") -> tuple[list, list, dict, str]:
    """(keys, values, decoder options, decoder name): one INSERT per matrix value plus one
    NULL per column (of the columns whose type starts with `only`)."""
    encoder = PROTOCOLS[protocol](tables(), time_zone=time_zone)
    keys, values = [], []
    for i, column in enumerate(MATRIX):
        if not column.mysql_type.startswith(only):
            continue
        for j, v in enumerate([*(x.value for x in column.values), None]):
            ts = make_tso(1_767_225_600_000 + i * 1000 + j, 0)
            change = RowChange(DATABASE, table_name(i), INSERT, None, {"id": j, "v": v})
            key, value = encoder.encode_row(change, ts, build_ms=ts >> 18)
            keys.append(key)
            values.append(value)
    name, options = encoder.decoder
    return keys, values, {**options, "time-zone": time_zone}, name


def _scale_and_digits(texts: list[str]) -> tuple[int, int]:
    """What the snapshot infers for a decimal without parameters (window_schema.window_table_schemas)."""
    scale = max((len(re.search(r"\.(\d*)", t).group(1)) if "." in t else 0 for t in texts), default=0)
    digits = max((len(re.match(r"^\s*[+-]?0*(\d*)", t).group(1)) for t in texts), default=0)
    return scale, digits


def typed_matrix(spark, protocol: str, time_zone: str = TIME_ZONE, only: str = "") -> tuple[dict, list]:
    """(table -> [(id, (type text, Spark type), typed value)], quarantined events) after
    decode, value conversion and typing."""
    keys, values, options, decoder_name = messages(protocol, time_zone, only)
    decoded = quarantine_unconvertible_values(get_decoder(decoder_name, options).decode(
        raw_frame(spark, values, keys=keys)))
    rows = decoded.select(
        "table", REJECT_REASON, REJECT_DETAIL, F.col("after")["id"].alias("id"), F.col("after")["v"].alias("v"),
        F.col("column_types")["v"].alias("type"),
    ).collect()
    rejected = [(r.table, r.id, r[REJECT_REASON], r[REJECT_DETAIL]) for r in rows if r[REJECT_REASON]]

    by_table: dict[str, list] = {}
    for r in rows:
        by_table.setdefault(r.table, []).append(r)
    dtypes = {}
    for table, rs in by_table.items():
        type_text = next(r.type for r in rs if r.type is not None)
        mtype = parse_mysql_type(type_text)
        texts = [r.v for r in rs if r.v is not None]
        inferred = _scale_and_digits(texts) if is_decimal_without_params(mtype) else (0, 0)
        dtypes[table] = (type_text, spark_type(mtype, *inferred))

    texts = spark.createDataFrame([(r.table, int(r.id), r.v) for r in rows], "table string, id int, v string")
    typed = texts.select("table", "id", F.struct(*[
        F.when(F.col("table") == t, typed_value(F.col("v"), dtype)).alias(t) for t, (_, dtype) in dtypes.items()
    ]).alias("typed")).collect()
    out: dict[str, list] = {}
    for r in typed:
        out.setdefault(r.table, []).append((r.id, dtypes[r.table], r.typed[r.table]))
    return {t: sorted(v) for t, v in out.items()}, rejected


def normal(v):
    """Collected values in comparable form: bytes for binary, UTC instants for timestamps,
    floats by their bits (so -0.0, float32 rounding and NaN compare exactly)."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, float):
        return ("float", struct.pack(">d", v))
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(timezone.utc)
    return v


def _spark_instant(v, dtype):
    """TimestampType values come back naive in the Python process's local zone."""
    if isinstance(dtype, T.TimestampType) and v is not None:
        return v.astimezone(timezone.utc)
    return v


@pytest.fixture(scope="module", params=sorted(PROTOCOLS))
def protocol_result(request, spark):
    return request.param, typed_matrix(spark, request.param)


def test_nothing_is_quarantined(protocol_result):
    protocol, (_, rejected) = protocol_result
    assert rejected == [], f"{protocol}: quarantined {rejected}"


def mismatches(protocol: str, result: dict, only: str = "") -> list[str]:
    out = []
    for i, column in enumerate(MATRIX):
        if not column.mysql_type.startswith(only):
            continue
        got = result.get(table_name(i), [])
        want = [*(expected_for(x, protocol) for x in column.values), None]
        actual = [_spark_instant(v, dtype) for _, (_, dtype), v in got]
        if [normal(v) for v in actual] != [normal(v) for v in want]:
            types = {str(t) for _, t, _ in got}
            out.append(f"{column.mysql_type} {types}: got {actual!r}, want {want!r}")
    return out


def test_every_value_is_exact(protocol_result):
    protocol, (result, _) = protocol_result
    bad = mismatches(protocol, result)
    assert not bad, f"{protocol}:\n" + "\n".join(bad)


@pytest.mark.parametrize("protocol", WALL_CLOCK_TIMESTAMP)
def test_timestamps_in_a_zone_without_dst(spark, protocol):
    """Asia/Shanghai (+08:00 all year): every instant, the DST-ambiguous one included, is exact."""
    result, rejected = typed_matrix(spark, protocol, "Asia/Shanghai", only="timestamp")
    assert rejected == []
    want = {i: [*(x.expected for x in c.values), None]
            for i, c in enumerate(MATRIX) if c.mysql_type.startswith("timestamp")}
    got = {int(t[1:]): [_spark_instant(v, dtype) for _, (_, dtype), v in rows] for t, rows in result.items()}
    assert got == want
