"""`EnvelopeReader`: the schema of `{"schema", "payload"}` messages is read once per distinct
text, and the fast path always gives what parsing the whole message gives."""

from __future__ import annotations

import json

import pytest

from cdc_assets.decode.debezium import envelope as debezium_envelope
from cdc_assets.decode.debezium.envelope import NO_SCHEMA, EnvelopeReader, row_schema
from cdc_assets.decode.debezium.exact_json import loads_exact

SCHEMA = {"type": "struct", "fields": [
    {"field": "before", "type": "struct", "fields": [{"field": "id", "type": "int32"}]},
    {"field": "after", "type": "struct", "fields": [
        {"field": "id", "type": "int32"}, {"field": "amount", "type": "double", "tidb_type": "decimal(10,2)"}]},
]}
PAYLOAD = {"op": "c", "after": {"id": 1, "amount": 12.5}, "source": {"commit_ts": 5}}
S, P = json.dumps(SCHEMA), json.dumps(PAYLOAD)


def _whole(text: str):
    m = loads_exact(text)
    return (m.get("payload", m), row_schema(m.get("schema"))) if type(m) is dict else (m, NO_SCHEMA)


MESSAGES = [
    f'{{"payload": {P}, "schema": {S}}}',  # TiCDC
    f'{{"schema": {S}, "payload": {P}}}',  # Debezium's connector
    f' {{ "schema" : {S} ,\n "payload" : {P} }}\n',
    f'{{"payload": {P}}}',  # debezium-disable-schema
    P,  # schemas.enable=false
    f'{{"payload": {P}, "schema": {S}, "schema": {{"fields": []}}}}',  # duplicate key: the last wins
    f'{{"schema": {{"fields": []}}, "payload": {P}, "schema": {S}}}',
    f'{{"payload": {P}, "schema": {S}, "extra": 1}}',
    f'{{"schema": {S}, "payload": {P}, "extra": 1}}',
    f'{{"schema": 12, "payload": {P}}}',
    f'{{"schema": 123, "payload": {P}}}',
    '[1, 2]',
]


@pytest.mark.parametrize("text", MESSAGES)
def test_the_fast_path_reads_what_the_whole_message_says(text):
    reader = EnvelopeReader()
    for other in MESSAGES:  # a warm cache must not change the answer
        try:
            reader.read(other)
        except ValueError:
            pass
    assert reader.read(text) == _whole(text) == EnvelopeReader().read(text)


def test_malformed_json_still_fails():
    for text in (f'{{"payload": {P}, "schema": {S}', f'{{"schema": {S}, "payload": ', '{"payload": NaN}'):
        with pytest.raises(ValueError):
            EnvelopeReader().read(text)


def test_a_schema_is_interpreted_once_per_distinct_text(monkeypatch):
    calls = []
    original = debezium_envelope.row_schema
    monkeypatch.setattr(debezium_envelope, "row_schema", lambda *a: calls.append(1) or original(*a))
    reader = EnvelopeReader()
    for order in ("payload_first", "schema_first"):
        calls.clear()
        for i in range(5):
            payload = json.dumps({**PAYLOAD, "after": {"id": i, "amount": 1.25}})
            text = f'{{"payload": {payload}, "schema": {S}}}' if order == "payload_first" \
                else f'{{"schema": {S}, "payload": {payload}}}'
            got_payload, schema = reader.read(text)
            assert got_payload["after"]["id"] == i and schema.column_types == {"id": "int", "amount": "decimal(10,2)"}
        assert len(calls) <= 1, order


def _schema_with_after(fields: list[dict]) -> dict:
    return {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": fields}]}


def test_a_column_listed_twice_with_one_schema_is_one_column():
    """pingcap/ticdc's Debezium encoder lists a VIRTUAL generated column twice (the loop over
    every column, then the virtual ones again); its rows must not lose their types."""
    col = {"field": "b", "type": "int32", "optional": True, "tidb_type": "int"}
    twice = row_schema(_schema_with_after([{"field": "id", "type": "int32", "tidb_type": "int"}, col, dict(col)]))
    once = row_schema(_schema_with_after([{"field": "id", "type": "int32", "tidb_type": "int"}, col]))
    assert twice == once
    assert not twice.bad and list(twice.column_types) == ["id", "b"]


def test_a_column_listed_twice_with_two_schemas_leaves_the_row_untyped():
    fields = [{"field": "id", "type": "int32"}, {"field": "id", "type": "string"}]
    assert row_schema(_schema_with_after(fields)).bad
