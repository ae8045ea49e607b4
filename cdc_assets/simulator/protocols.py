"""Registry of simulated protocol encoders: add a protocol = add a module + one entry."""

from __future__ import annotations

from collections.abc import Iterable

from cdc_assets.simulator.canal_json import CanalJsonEncoder
from cdc_assets.simulator.canal_official import CanalOfficialEncoder
from cdc_assets.simulator.cloudcanal_json import CloudCanalJsonEncoder
from cdc_assets.simulator.debezium import DebeziumEncoder
from cdc_assets.simulator.dts_avro import DtsAvroEncoder
from cdc_assets.simulator.encoder import Encoder
from cdc_assets.simulator.open_protocol import OpenProtocolEncoder
from cdc_assets.simulator.schema import TableDef

ENCODERS: dict[str, type[Encoder]] = {
    CanalJsonEncoder.name: CanalJsonEncoder,
    CanalOfficialEncoder.name: CanalOfficialEncoder,
    CloudCanalJsonEncoder.name: CloudCanalJsonEncoder,
    DebeziumEncoder.name: DebeziumEncoder,
    DtsAvroEncoder.name: DtsAvroEncoder,
    OpenProtocolEncoder.name: OpenProtocolEncoder,
}


def make_encoder(protocol: str, tables: Iterable[TableDef]) -> Encoder:
    try:
        cls = ENCODERS[protocol]
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(sorted(ENCODERS))}") from None
    return cls(tables)
