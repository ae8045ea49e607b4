"""The stage packages import only downwards (docs/architecture.md, Module map), and only
`defs/` and the entry points import Dagster: a module that breaks either fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cdc_assets"
# What each package may import of the others (entry points and defs/ may import any stage).
MAY_IMPORT = {
    "common": set(),
    "contracts": {"common"},
    "decode": {"common", "contracts"},
    "align": {"common", "contracts", "decode"},  # a group of windows is decoded, then aligned (window_group)
    "landing": {"common", "contracts", "decode"},
    "snapshot": {"common", "contracts", "decode", "align", "landing"},
    "simulator": {"common", "contracts", "decode", "landing", "snapshot"},
}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _stage_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) > 1 and parts[0] in MAY_IMPORT:
            yield parts[0], path


def test_stages_import_only_downwards():
    upward = []
    for stage, path in _stage_modules():
        for name in _imports(path):
            if name.startswith("cdc_assets."):
                other = name.split(".")[1]
                if other != stage and other not in MAY_IMPORT[stage]:
                    upward.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not upward, upward


def test_only_the_wiring_imports_dagster():
    wired = [str(path.relative_to(PACKAGE)) for _, path in _stage_modules()
             if any(n == "dagster" or n.startswith(("dagster.", "dagster_")) for n in _imports(path))]
    assert not wired, wired
