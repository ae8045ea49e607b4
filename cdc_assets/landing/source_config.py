"""A declared source's protocol, layout and completeness mode, checked against the registries
(the decoders' `Protocol`, the layouts' `Layout`, `CompletenessMode`) once, when the
definitions load: later code reads the enums, never the text. Settings (common/settings.py)
hold the text as written, since nothing in common knows the stages' registries."""

from __future__ import annotations

from dataclasses import replace

from cdc_assets.common.settings import SourceConfig
from cdc_assets.decode import Protocol, protocol_named
from cdc_assets.landing.layouts import AUTO_LAYOUT, Layout, layout_named
from cdc_assets.landing.state import AUTO_COMPLETENESS, CompletenessMode


def layout_setting(name: str) -> Layout | str:
    """A layout, or `auto` (detected from the dump)."""
    return AUTO_LAYOUT if name == AUTO_LAYOUT else layout_named(name)


def completeness_setting(name: str) -> CompletenessMode | str:
    """A completeness mode, or `auto` (watermarks when the source has them, else event time)."""
    return AUTO_COMPLETENESS if name == AUTO_COMPLETENESS else CompletenessMode.parse(name)


def checked_source(source: SourceConfig) -> SourceConfig:
    """`source` with its protocol, layout and completeness as the registries' enums; a
    ValueError naming the source, the value and the known ones."""
    try:
        protocol: Protocol = protocol_named(source.protocol)
        layout, completeness = layout_setting(source.layout), completeness_setting(source.completeness)
    except ValueError as exc:
        raise ValueError(f"source {source.name!r}: {exc}") from None
    return replace(source, protocol=protocol, layout=layout, completeness=completeness)
