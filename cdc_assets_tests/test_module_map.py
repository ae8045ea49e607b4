"""docs/architecture.md opens with a module map: every package and module of `cdc_assets/`,
one line each. A module added without its line, or a line left for one that is gone, fails."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cdc_assets"
_ENTRY = re.compile(r"^(?:- )?`([\w/.]+)`:", re.M)


def _map_section() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("## Module map")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _listed() -> set[str]:
    return set(_ENTRY.findall(_map_section()))


def _present() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py":
            if rel.parent != Path("."):
                found.add(f"{rel.parent.as_posix()}/")
        else:
            found.add(rel.as_posix())
    return found


def test_architecture_opens_with_the_module_map():
    text = (ROOT / "docs" / "architecture.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Module map"


def test_every_module_and_package_has_its_line():
    missing = sorted(_present() - _listed())
    assert not missing, f"add to docs/architecture.md's module map: {missing}"


def test_every_line_names_a_module_that_exists():
    gone = sorted(_listed() - _present())
    assert not gone, f"the module map names what is not in cdc_assets/: {gone}"
