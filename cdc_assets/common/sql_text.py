"""SQL text for the expressions a window builds per table (docs/performance.md step 28).

In PySpark's classic client every `F` function, `cast`, `alias` or comparison is a few py4j
round trips (the function's lookup, its arguments' conversion, the call). A table's typed
actions and MERGE source were about 600 of them, built anew for every table and window:
0.4 s on an idle driver, 1-1.5 s with the window's other tables' jobs running. The same
expressions as SQL text are parsed by the JVM in one call each (`selectExpr`, `F.expr`).
Only the names and values that come from the data are quoted here; the rest is fixed text.
"""

from __future__ import annotations


def ident(name: str) -> str:
    """`name` as a quoted SQL identifier (any text, backticks included)."""
    return "`" + name.replace("`", "``") + "`"


def string(value: str) -> str:
    """`value` as a SQL string expression. Text with a quote or a backslash is spelled in
    hex and decoded, so it reads the same whatever the session's string-literal escaping
    (`spark.sql.parser.escapedStringLiterals`)."""
    if "'" in value or "\\" in value:
        return f"decode(X'{value.encode('utf-8').hex()}', 'UTF-8')"
    return f"'{value}'"


def strings(values: list[str]) -> str:
    """`values` as the list of an IN (...): at least one value."""
    return ", ".join(string(v) for v in values)
