"""docs/types.md's type table says what `mysql_types.spark_type` does, and names every
type of the golden matrix."""

from __future__ import annotations

import re
from pathlib import Path

from cdc_assets.common.mysql_types import parse_mysql_type, spark_type
from cdc_assets_tests.decode.types.matrix import MATRIX

DOC = Path(__file__).resolve().parents[3] / "docs" / "types.md"
_SECTION = "## MySQL type → Spark type"


def doc_rows() -> list[tuple[list[str], str]]:
    """(type texts of the first cell, first Spark type of the second) per table row."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index(_SECTION):].split("\n## ", 1)[0]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        rows.append((re.findall(r"`([^`]+)`", cells[0]), re.search(r"`(\w+Type\([^`]*\))`", cells[1]).group(1)))
    return rows


def test_the_doc_table_matches_the_code():
    rows = doc_rows()
    assert len(rows) >= 20
    wrong = [(t, spark_type(parse_mysql_type(t)), want) for types, want in rows for t in types
             if repr(spark_type(parse_mysql_type(t))) != want]
    assert wrong == []


def test_every_matrix_type_is_in_the_doc():
    documented = {re.sub(r"\(.*\)", "", t) for types, _ in doc_rows() for t in types}
    missing = {c.mysql_type for c in MATRIX if re.sub(r"\(.*\)", "", c.mysql_type) not in documented}
    assert missing == set()
