"""Protocol registry: protocol name -> decoder class. Adding a protocol = one module + one line."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from cdc_assets.decode.base import Decoder
from cdc_assets.decode.canal_json.decoder import CanalJsonDecoder
from cdc_assets.decode.cloudcanal_json.decoder import CloudCanalJsonDecoder
from cdc_assets.decode.debezium.decoder import DebeziumDecoder, DebeziumJsonDecoder
from cdc_assets.decode.dts_avro.decoder import DtsAvroDecoder
from cdc_assets.decode.open_protocol.decoder import OpenProtocolDecoder

DECODERS: dict[str, type[Decoder]] = {
    CanalJsonDecoder.name: CanalJsonDecoder,
    DebeziumDecoder.name: DebeziumDecoder, DebeziumJsonDecoder.name: DebeziumJsonDecoder,
    CloudCanalJsonDecoder.name: CloudCanalJsonDecoder,
    DtsAvroDecoder.name: DtsAvroDecoder,
    OpenProtocolDecoder.name: OpenProtocolDecoder,
}


# The protocol names a source may declare, one per registered decoder (`canal-json`: CANAL_JSON).
Protocol = StrEnum("Protocol", {name.upper().replace("-", "_"): name for name in DECODERS})


def protocol_named(name: str) -> Protocol:
    """The registered protocol `name`; a ValueError naming the known ones."""
    try:
        return Protocol(name)
    except ValueError:
        raise ValueError(f"unknown protocol {name!r}; known protocols: {', '.join(sorted(DECODERS))}") from None


def get_decoder(protocol: str, options: Mapping[str, str] | None = None) -> Decoder:
    return DECODERS[protocol_named(protocol)](options)


__all__ = ["DECODERS", "Decoder", "Protocol", "get_decoder", "protocol_named"]
