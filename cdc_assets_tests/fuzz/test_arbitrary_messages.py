"""Property tests (hypothesis): whatever bytes or JSON arrive, every decoder keeps its
properties (assert_decoder_properties). The strategies reach past the JSON parser with
documents shaped like each protocol's messages, fields of any type included."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cdc_assets.decode import DECODERS, get_decoder
from cdc_assets_tests.fuzz.corpus import raw_messages
from cdc_assets_tests.fuzz.properties import VERSION_ONLY_KEY, assert_decoder_properties, decode_like_the_asset

pytestmark = pytest.mark.slow

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12)
tso = st.integers(0, 2**64) | st.just(463_000_000_000_000_000)
row_image = st.dictionaries(st.sampled_from(["id", "name", "amount", "raw"]), scalars | st.text(max_size=5), max_size=4)


def shaped(fields: dict) -> st.SearchStrategy:
    """A JSON object with any subset of `fields`, each a plausible value or anything at all."""
    return st.fixed_dictionaries({}, optional={k: v | json_values for k, v in fields.items()})


canal = shaped({
    "database": st.sampled_from(["db", ""]), "table": st.sampled_from(["t", ""]), "isDdl": st.booleans(),
    "type": st.sampled_from(["INSERT", "UPDATE", "DELETE", "TIDB_WATERMARK", "CREATE", "QUERY"]),
    "pkNames": st.just(["id"]), "data": st.lists(row_image, max_size=2), "old": st.lists(row_image, max_size=2),
    "mysqlType": st.just({"id": "int", "name": "varchar", "amount": "decimal(6,2)", "raw": "blob"}),
    "es": st.integers(-1, 2**63 - 1), "sql": st.text(max_size=10), "_tidb": shaped({"commitTs": tso, "watermarkTs": tso}),
    "id": st.integers(-1, 2**40),
})
cloudcanal = shaped({
    "action": st.sampled_from(["INSERT", "UPDATE", "DELETE", "QUERY"]), "db": st.just("db"), "table": st.just("t"),
    "pks": st.just(["id"]), "data": st.lists(row_image, max_size=2), "before": st.lists(row_image, max_size=2),
    "execTs": st.integers(-1, 2**63 - 1), "isDdl": st.booleans(), "sql": st.text(max_size=10),
})
debezium = shaped({
    "op": st.sampled_from(["c", "u", "d", "r", "m", "x"]), "before": row_image, "after": row_image,
    "source": shaped({"db": st.just("db"), "table": st.just("t"), "ts_ms": st.integers(-1, 2**63 - 1),
                      "commit_ts": tso}),
    "ts_ms": st.integers(-1, 2**63 - 1), "ddl": st.text(max_size=10),
}).map(lambda p: {"payload": p})


def _op_key_frames(events: list) -> bytes:
    frames = [json.dumps(e).encode() for e in events]
    return VERSION_ONLY_KEY + b"".join(struct.pack(">Q", len(f)) + f for f in frames)


open_protocol_keys = st.lists(shaped({"ts": tso, "scm": st.just("db"), "tbl": st.just("t"),
                                      "t": st.sampled_from([1, 2, 3, 4])}), max_size=3).map(_op_key_frames)
text_values = (json_values | canal | cloudcanal | debezium).map(lambda d: json.dumps(d).encode())
messages = st.lists(
    st.tuples(st.none() | st.binary(max_size=40) | open_protocol_keys,
              st.none() | st.binary(max_size=120) | text_values),
    min_size=1, max_size=30,
)


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=messages)
def test_any_input_is_decoded_or_quarantined_by_every_decoder(spark, batch):
    raw = raw_messages(spark, batch, "any")
    for name in sorted(DECODERS):
        decoder = get_decoder(name)
        out = decode_like_the_asset(decoder, raw).persist()
        try:
            assert_decoder_properties(raw, out, decoder, name)
        finally:
            out.unpersist()
