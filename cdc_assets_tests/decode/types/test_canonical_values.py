"""value_conversion's canonical TIME text and zero dates, on hand-written Canal-JSON rows."""

from __future__ import annotations

import json

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.value_conversion import quarantine_unconvertible_values
from cdc_assets_tests.helpers import raw_frame

TS = 463_000_000_000_000_000
TYPES = {"id": "int", "t": "time", "d": "date", "dt": "datetime", "ts": "timestamp", "s": "varchar"}


def _message(op: str, data: dict, old: dict | None = None, pk: tuple[str, ...] = ("id",)) -> bytes:
    return json.dumps({
        "id": 0, "database": "db", "table": "t", "pkNames": list(pk), "isDdl": False, "type": op, "es": TS >> 18,
        "ts": TS >> 18, "sql": "", "mysqlType": TYPES, "data": [data], "old": [old] if old else None,
        "_tidb": {"commitTs": TS},
    }).encode()


def _images(spark, *messages):
    out = quarantine_unconvertible_values(get_decoder("canal-json").decode(raw_frame(spark, list(messages))))
    rows = out.orderBy("kafka_offset").select(REJECT_REASON, "before", "after", "pk_values").collect()
    return [(r[REJECT_REASON], r.before, r.after) for r in rows], [r.pk_values for r in rows]


def test_time_text_is_canonical_and_zero_dates_are_null(spark):
    row = {"id": "1", "t": "-838:59:59.000", "d": "0000-00-00", "dt": "0000-00-00 00:00:00.000",
           "ts": "0000-00-00 00:00:00", "s": "0000-00-00"}
    old = {**row, "t": "1:02:03.12", "d": "2024-02-29"}
    got, _ = _images(spark, _message("UPDATE", row, old))
    want_after = {"id": "1", "t": "-838:59:59", "d": None, "dt": None, "ts": None, "s": "0000-00-00"}
    assert got == [(None, {**want_after, "t": "01:02:03.120000", "d": "2024-02-29"}, want_after)]


def test_rows_without_such_values_are_unchanged(spark):
    row = {"id": "2", "t": "12:00:00.123456", "d": "2024-01-01", "dt": "2024-01-01 10:00:00", "ts": None,
           "s": "x"}
    assert _images(spark, _message("INSERT", row))[0] == [(None, None, row)]


def test_text_that_is_not_a_time_is_kept(spark):
    ((reason, _, after),), _ = _images(spark, _message("INSERT", {"id": "3", "t": "noon", "d": None, "dt": None,
                                                               "ts": None, "s": None}))
    assert after["t"] == "noon"
    assert reason is None  # TIME is text: nothing to convert, so nothing is quarantined


def test_key_columns_keep_a_usable_key(spark):
    """A TIME key is made canonical in pk_values too (the snapshot compares it with the
    before image). A zero-date key is not made NULL (a key cannot be): it does not convert
    to a date, so its event is quarantined."""
    row = {"id": "4", "t": "01:00:00.000", "d": "2024-01-01", "dt": None, "ts": None, "s": None}
    zero = {**row, "id": "5", "d": "0000-00-00"}
    images, keys = _images(spark, _message("INSERT", row, pk=("t", "d")), _message("INSERT", zero, pk=("t", "d")))
    assert images == [(None, None, {**row, "t": "01:00:00"}), ("invalid_value", None, {**zero, "t": "01:00:00"})]
    assert keys == [["01:00:00", "2024-01-01"], ["01:00:00", "0000-00-00"]]
