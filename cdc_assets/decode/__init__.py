"""Protocol registry: protocol name -> decoder class. Adding a protocol = one module + one line."""

from __future__ import annotations

from collections.abc import Mapping

from cdc_assets.decode.base import Decoder
from cdc_assets.decode.canal_json.decoder import CanalJsonDecoder
from cdc_assets.decode.debezium.decoder import DebeziumDecoder, DebeziumJsonDecoder
from cdc_assets.decode.cloudcanal_json.decoder import CloudCanalJsonDecoder
from cdc_assets.decode.dts_avro.decoder import DtsAvroDecoder
from cdc_assets.decode.open_protocol.decoder import OpenProtocolDecoder

DECODERS: dict[str, type[Decoder]] = {
    CanalJsonDecoder.name: CanalJsonDecoder,
    DebeziumDecoder.name: DebeziumDecoder, DebeziumJsonDecoder.name: DebeziumJsonDecoder,
    CloudCanalJsonDecoder.name: CloudCanalJsonDecoder,
    DtsAvroDecoder.name: DtsAvroDecoder,
    OpenProtocolDecoder.name: OpenProtocolDecoder,
}


def get_decoder(protocol: str, options: Mapping[str, str] | None = None) -> Decoder:
    try:
        decoder_cls = DECODERS[protocol]
    except KeyError:
        raise ValueError(
            f"unknown protocol {protocol!r}; known protocols: {', '.join(sorted(DECODERS))}"
        ) from None
    return decoder_cls(options)


__all__ = ["DECODERS", "Decoder", "get_decoder"]
