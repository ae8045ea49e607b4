"""Storage names of tables (`names.table_id`): today's names kept, long names bounded,
readable and kept apart, every file name they make fits the file system."""

import hashlib
import os
from urllib.parse import unquote

from cdc_assets.common.names import MAX_PART_BYTES, storage_part, table_id, temp_sibling

CHINESE_40 = "客户订单明细历史归档" * 4  # 40 characters, 360 bytes encoded


def test_names_that_fit_keep_todays_percent_encoding():
    assert table_id("shop", "orders") == "shop.orders"
    assert table_id("../..", "../../etc") == "%2E%2E%2F%2E%2E.%2E%2E%2F%2E%2E%2Fetc"
    assert table_id("db", "ünï 表") == "db.%C3%BCn%C3%AF%20%E8%A1%A8"
    assert table_id("d" * 64, "t" * 64) == f"{'d' * 64}.{'t' * 64}"  # the longest ASCII names MySQL allows


def test_a_long_name_is_a_readable_prefix_the_mark_and_the_digest_of_the_real_name():
    assert len(CHINESE_40) == 40
    part = storage_part(CHINESE_40)
    prefix, digest = part.split("~")
    assert digest == hashlib.sha256(CHINESE_40.encode()).hexdigest()
    assert unquote(prefix) == CHINESE_40[:5]  # whole characters only: 5 of 9 bytes each fit in 45 bytes
    assert len(part) == 45 + 1 + 64 <= MAX_PART_BYTES
    assert table_id("shop", CHINESE_40) == f"shop.{part}"


def test_bounded_names_are_kept_apart():
    same_start = [CHINESE_40, CHINESE_40[:-1] + "表", "x" * 300, "x" * 299 + "y", "x" * 10_000]
    parts = [storage_part(n) for n in same_start]
    assert len(set(parts)) == len(parts)
    assert all(len(p) <= MAX_PART_BYTES for p in parts)
    # A long name never becomes a name that fits: `~` is in no percent-encoding.
    assert "~" not in storage_part("~" * 10) and storage_part("~" * 10) == "%7E" * 10
    # At the bound exactly the encoding is kept; one byte more and the digest form is used.
    assert storage_part("a" * MAX_PART_BYTES) == "a" * MAX_PART_BYTES
    assert "~" in storage_part("a" * (MAX_PART_BYTES + 1))


def test_every_file_name_a_table_makes_fits_the_file_system(tmp_path):
    """The longest: the export's temporary file beside `<db>.<table>.parquet`."""
    tid = table_id("库" * 64, CHINESE_40 + "x" * 24)
    final = tmp_path / f"{tid}.parquet"
    tmp = temp_sibling(final)
    assert len(tmp.name.encode()) <= 255
    tmp.write_text("x")  # the file system takes it
    os.replace(tmp, final)
    assert final.exists()


def test_names_python_cannot_encode_as_utf8_still_get_a_name():
    assert storage_part("a\udc80b") == "a%ED%B2%80b"  # a lone surrogate, as `surrogatepass` writes it
