"""TiCDC's `large-message-handle-compression`: snappy blocks and lz4 frames, as Canal-JSON
message values and as Open Protocol event value frames (the key-only events of its
`large-message-handle-option` are tested with each protocol's events)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.common.arrow_events import zone
from cdc_assets.decode.common.large_messages import _snappy_length, decompress
from cdc_assets.decode.open_protocol.events import decode_message
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.decode.test_open_protocol_frames import ROW_KEY, col, msg
from cdc_assets_tests.helpers import raw_frame

OPTION = "large-message-handle-compression"


def compress(data: bytes, codec: str) -> bytes:
    """As TiCDC writes them: Go's `snappy.Encode` (a raw block), `lz4.NewWriter` (a frame)."""
    if codec == "snappy":
        return pa.compress(data, codec="snappy", asbytes=True)
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "lz4") as out:
        out.write(data)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_values_decompress_and_others_are_taken_as_written(codec):
    text = b'{"type":"INSERT","data":[{"id":"1"}]}' * 3
    assert decompress(compress(text, codec), codec) == text
    assert decompress(text, codec) == text  # written before compression was switched on
    assert decompress(compress(text, codec)[:-4], codec) == compress(text, codec)[:-4]  # broken: as is


def test_a_snappy_block_as_go_writes_it():
    """Go's `snappy.Encode` writes an input under 17 bytes as one literal: the length varint,
    the literal tag ((n - 1) << 2), the bytes. Any snappy reader must take it."""
    text = b'{"t":"INSERT"}'
    assert decompress(bytes([len(text), (len(text) - 1) << 2]) + text, "snappy") == text


def test_a_garbage_snappy_length_is_never_allocated():
    garbage = b"\xff\xff\xff\xff\x0f{}"  # a varint of 4 GiB in front of 2 bytes
    assert _snappy_length(garbage) is None
    assert decompress(garbage, "snappy") == garbage


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_open_protocol_event_values_decompress_frame_by_frame(codec):
    insert, delete = {"u": {"id": col(3, 1, h=True), "v": col(15, "x" * 50)}}, {"d": {"id": col(3, 2, h=True)}}
    key, value = msg((ROW_KEY, insert), (ROW_KEY, delete))
    frames = [compress(json.dumps(v).encode(), codec) for v in (insert, delete)]
    packed = b"".join(len(f).to_bytes(8, "big") + f for f in frames)
    events = decode_message(key, packed, zone("UTC"), codec=codec)
    assert [(e.get(REJECT_REASON), e["op"], e["pk_values"]) for e in events] == [
        (None, "INSERT", ["1"]), (None, "DELETE", ["2"])]
    assert events[0]["after"]["v"] == "x" * 50
    assert decode_message(key, value, zone("UTC"), codec=codec) == events  # uncompressed: the same


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_canal_json_routes_and_decodes_compressed_values_and_lands_the_raw_bytes(spark, codec):
    plain = [row("INSERT", 1000 << 18, values(1, "a")), row("DELETE", 2000 << 18, values(1, "a")),
             watermark(3000 << 18)]
    packed = [compress(v, codec) for v in plain]
    decoder = get_decoder("canal-json", {OPTION: codec})
    routed = decoder.route(raw_frame(spark, packed)).orderBy("kafka_offset").collect()
    assert [(r["routing_ms"], r["watermark_ts"]) for r in routed] == [(1000, None), (2000, None), (3000, 3000 << 18)]
    assert [r["value"] for r in routed] == packed
    columns = ["event_kind", "op", "commit_ts", "pk_values", "after", "before", REJECT_REASON]
    got = decoder.decode(raw_frame(spark, packed)).orderBy("kafka_offset").select(*columns).collect()
    want = get_decoder("canal-json").decode(raw_frame(spark, plain)).orderBy("kafka_offset").select(*columns).collect()
    assert got == want and [r["op"] for r in got] == ["INSERT", "DELETE", None]
    broken = compress(b'{"type":"INSERT","data":[]}', codec)  # decompresses, but has no rows
    (reject,) = decoder.decode(raw_frame(spark, [broken])).collect()
    assert (reject[REJECT_REASON], reject["value"]) == ("missing_row_data", broken)  # the bytes as landed


def test_an_unknown_codec_fails_when_the_decoder_is_made():
    with pytest.raises(ValueError, match="one of none, snappy, lz4"):
        get_decoder("open-protocol", {OPTION: "zstd"})
