"""The `primary-key` option: its syntax, and every decoder taking a key from it only for rows
whose message names none (the message's own key always wins)."""

from __future__ import annotations

import functools
import json
from datetime import timezone

import pytest

from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.canal_json import events as canal_json_events
from cdc_assets.decode.cloudcanal_json import events as cloudcanal_json_events
from cdc_assets.decode.common.key_option import NO_KEYS, KeyOption, parse_key_option
from cdc_assets.decode.debezium import events as debezium_events
from cdc_assets.decode.open_protocol.events import decode_message
from cdc_assets_tests.decode.arrow_batch import decode_values

PROTOCOLS = ["canal-json", "cloudcanal-json", "debezium", "debezium-json", "dts-avro", "open-protocol"]


# -- syntax -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, every, by_table",
    [
        ("", (), {}),
        ("  ;  ", (), {}),
        ("id", ("id",), {}),
        (" a , b ", ("a", "b"), {}),
        ("shop.orders:id;shop.items:order_id,line", (), {"shop.orders": ("id",), "shop.items": ("order_id", "line")}),
        ("shop.items: order_id , line ; id", ("id",), {"shop.items": ("order_id", "line")}),
        ("db.schema.t:k", (), {"db.schema.t": ("k",)}),  # CloudCanal's database may be db.schema
    ],
)
def test_the_option_parses(text, every, by_table):
    assert parse_key_option(text) == KeyOption(every, by_table)


@pytest.mark.parametrize(
    "text, says",
    [
        ("a,,b", "empty column name"),
        ("shop.t:", "empty column name"),
        ("a,a", "column named twice"),
        ("a;b", "two keys for every table"),
        ("orders:id", "not a distinct database.table"),
        ("shop.:id", "not a distinct database.table"),
        ("shop.t:id;shop.t:k", "not a distinct database.table"),
        ("shop.orders:id,shop.items:order_id,line", "separate them with ';'"),  # `,` for `;`
        ("shop.orders:id shop.items:k", "separate them with ';'"),
        ("shop.orders=id", "holds '='"),
    ],
)
def test_a_bad_option_fails_when_the_decoder_is_made(text, says):
    with pytest.raises(ValueError, match=says):
        parse_key_option(text)
    for protocol in PROTOCOLS:
        with pytest.raises(ValueError, match=says):
            get_decoder(protocol, {"primary-key": text})


def test_a_table_of_its_own_wins_over_the_key_of_every_table():
    option = parse_key_option("id;shop.items:order_id,line")
    assert option.names_for("shop", "items") == ["order_id", "line"]
    assert option.names_for("shop", "orders") == ["id"]
    assert option.names_for(None, None) == ["id"]
    assert parse_key_option("shop.items:k").names_for("shop", "orders") is None
    assert NO_KEYS.names_for("shop", "items") is None and not NO_KEYS
    assert get_decoder("canal-json").key_option == NO_KEYS


# -- every decoder ---------------------------------------------------------------------------
OPTION = parse_key_option("shop.items:order_id,line;id")


def _canal(**over) -> dict:
    msg = {"id": 1, "database": "shop", "table": "items", "pkNames": None, "isDdl": False, "type": "INSERT",
           "es": 1_700_000_000_000, "mysqlType": {"order_id": "int", "line": "int", "id": "int"},
           "data": [{"order_id": "7", "line": "2", "id": "99"}], "old": None}
    return {**msg, **over}


def _cloudcanal(**over) -> dict:
    msg = {"action": "INSERT", "bid": 1, "db": "shop", "schema": None, "table": "items", "pks": [],
           "execTs": 1_700_000_000_000, "dbValType": {"order_id": "int", "line": "int", "id": "int"},
           "data": [{"order_id": "7", "line": "2", "id": "99"}], "before": None, "isDdl": False}
    return {**msg, **over}


def _keys_and_reasons(events: list[dict]) -> list[tuple]:
    return [(e["pk_names"], e["pk_values"], e[REJECT_REASON]) for e in events]


@pytest.mark.parametrize(
    "module, message",
    [(canal_json_events, _canal), (cloudcanal_json_events, _cloudcanal)],
)
def test_canal_shaped_rows_take_the_configured_key(module, message):
    decode = functools.partial(decode_values, functools.partial(module.decode_batches, key_option=OPTION))
    own_key = {"pkNames": ["id"]} if module is canal_json_events else {"pks": ["id"]}
    got = decode(message(), message(table="orders"), message(table="orders", data=[{"order_id": "7"}]),
                 message(**own_key))
    assert _keys_and_reasons(got) == [
        (["order_id", "line"], ["7", "2"], None),
        (["id"], ["99"], None),  # the key of every other table
        (["id"], [None], "null_primary_key"),  # a configured column the row lacks
        (["id"], ["99"], None),  # the message's own key wins
    ]
    (bare,) = decode_values(module.decode_batches, message())
    assert bare[REJECT_REASON] == "missing_primary_key" and "names none for its table" in bare[REJECT_DETAIL]


@pytest.mark.parametrize(
    "module, message, old_field",
    [(canal_json_events, _canal, "old"), (cloudcanal_json_events, _cloudcanal, "before")],
)
def test_an_update_that_sets_a_configured_key_column_to_null_is_a_null_key(module, message, old_field):
    """A configured key may name a nullable column: the after image's NULL is the key, never
    the before image's value (the snapshot would keep a row the source no longer has)."""
    update = message(type="UPDATE", action="UPDATE", data=[{"order_id": "7", "line": None, "id": "99"}],
                     **{old_field: [{"line": "2"}]})
    (ev,) = decode_values(functools.partial(module.decode_batches, key_option=OPTION), update)
    assert (ev["pk_values"], ev[REJECT_REASON]) == (["7", None], "null_primary_key")


def test_debezium_rows_without_a_key_take_the_configured_key():
    def decode(option, *values, keys=None):
        options = debezium_events.Options(derive_commit_ts=True, key_option=option)
        return decode_values(lambda batches, _tz: debezium_events.decode_batches(batches, options), *values, keys=keys)

    def payload(table):
        return {"op": "c", "after": {"order_id": 7, "line": 2, "id": 99}, "ts_ms": 1_700_000_000_000,
                "source": {"db": "shop", "table": table, "ts_ms": 1_700_000_000_000}}

    got = decode(OPTION, payload("items"), payload("orders"), payload("orders"),
                 keys=[None, None, json.dumps({"order_id": 7}).encode()])
    assert _keys_and_reasons(got) == [
        (["order_id", "line"], ["7", "2"], None), (["id"], ["99"], None), (["order_id"], ["7"], None)]
    assert decode(NO_KEYS, payload("items"))[0][REJECT_REASON] == "missing_primary_key"
    to_null = {**payload("items"), "op": "u", "before": {"order_id": 7, "line": 2, "id": 99},
               "after": {"order_id": 7, "line": None, "id": 99}}
    (ev,) = decode(OPTION, to_null)
    assert (ev["pk_values"], ev[REJECT_REASON]) == (["7", None], "null_primary_key")


def test_open_protocol_rows_without_key_flags_take_the_configured_key():
    def message(table: str, **columns) -> tuple[bytes, bytes]:
        key = json.dumps({"ts": 100 << 18, "scm": "shop", "tbl": table, "t": 1}).encode()
        value = json.dumps({"u": {k: {"t": 3, "f": f, "v": v} for k, (v, f) in columns.items()}}).encode()
        return ((1).to_bytes(8, "big") + len(key).to_bytes(8, "big") + key, len(value).to_bytes(8, "big") + value)

    plain = {"order_id": (7, 0), "line": (2, 0), "id": (99, 0)}
    got = [ev for m in (message("items", **plain), message("orders", **plain),
                        message("items", **{**plain, "id": (99, 0x08)}))
           for ev in decode_message(*m, timezone.utc, OPTION)]
    assert [(e["pk_names"], e["pk_values"], e.get(REJECT_REASON)) for e in got] == [
        (["order_id", "line"], ["7", "2"], None), (["id"], ["99"], None), (["id"], ["99"], None)]
    (bare,) = decode_message(*message("items", **plain), timezone.utc)
    assert bare[REJECT_REASON] == "missing_primary_key"
