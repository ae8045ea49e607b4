"""DDL: parsed with sqlglot, rewritten where it cannot be read as written, applied as barriers."""
