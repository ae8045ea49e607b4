"""Iceberg table names (`iceberg_tables.table_name`) decode back to the source's names
(`parse_table_name`), however hostile the names; names the encoder cannot write are refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from cdc_assets.common.iceberg_tables import name_part, parse_name_part, parse_table_name, table_name

HOSTILE = [
    "orders", "Orders", "order_items", "a.b", "..", "../..", "a/b", "/", "\\", "a__b", "__", "___", "_", "_a",
    "a_", "_a_", "a_b_c", "a__", "%", "%%", "%25", "%2E", "`", "a`b", "``", "'", '"', " ", " leading", "trailing ",
    "a b", "\t", "\n", "nul\0byte", "客户订单", "表_1", "注文__履歴", "🎉", "emoji 🎉 name",
    "e\u0301",  # a combining mark
    "ǅ", "²", "١٢٣", "\u200b", "\ud800", "", "x" * 64, "表" * 64,
]


@pytest.mark.parametrize("layer", ["snapshots", "change_table", "history"])
@pytest.mark.parametrize("database", HOSTILE, ids=repr)
def test_parse_table_name_inverts_table_name(layer, database):
    for table in HOSTILE:
        name = table_name(layer, database, table)
        assert parse_table_name(name) == (layer, database, table), name
        # one name per pair: the parts never hold the separator
        assert name.count("__") == 2


@settings(max_examples=500, deadline=None)
@given(st.text(), st.text())
def test_parse_table_name_inverts_any_names(database, table):
    assert parse_table_name(table_name("snapshots", database, table)) == ("snapshots", database, table)


@given(st.text(), st.text())
def test_distinct_names_never_share_a_table_name(a, b):
    if a != b:
        assert name_part(a) != name_part(b)


@pytest.mark.parametrize("name", [
    "snapshots__shop",  # too few parts
    "snapshots__shop__orders__x",  # too many
    "snapshots___shop__orders",  # a part starting with _
    "snapshots__shop_____orders",
    "Snapshots__shop__orders",  # not a layer name
    "__shop__orders",
    "snapshots__a%2eb__orders",  # lower-case hex: not what the encoder writes
    "snapshots__a.b__orders",  # '.' is always encoded
    "snapshots__%41__orders",  # 'A' is never encoded
    "snapshots__%ZZ__orders",
    "snapshots__%FF__orders",  # not UTF-8
    "snapshots____orders",  # an empty name is written '%'
    "snapshots__a_%5F__orders",
])
def test_names_the_encoder_cannot_write_are_refused(name):
    with pytest.raises(ValueError):
        parse_table_name(name)


def test_the_empty_name_has_a_part():
    assert name_part("") == "%" and parse_name_part("%") == ""
    assert parse_table_name("snapshots__%__%") == ("snapshots", "", "")
