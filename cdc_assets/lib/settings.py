"""Project settings from the environment, with embedded defaults that need nothing else.

Defaults: everything under `./.cdc_assets` (sample dump, landing area, warehouse), one
source `sample` reading TiCDC Canal-JSON from the shipped simulator's dump, hourly
commitTs windows starting 2026-01-01 UTC, local Spark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_START = "2026-01-01T00:00"


@dataclass(frozen=True)
class SourceConfig:
    name: str
    protocol: str
    input_path: str
    layout: str = "auto"  # auto | kafka-parquet | kcat-jsonl
    options: Mapping[str, str] = field(default_factory=dict)
    time_zone: str = "UTC"  # the changefeed's time zone, for TIMESTAMP columns


@dataclass(frozen=True)
class Settings:
    home: Path
    warehouse: Path
    sources: tuple[SourceConfig, ...]
    partition_start: datetime
    window_minutes: int = 60
    spark_master: str = "local[2]"

    @property
    def window_ms(self) -> int:
        return self.window_minutes * 60_000

    def source(self, name: str) -> SourceConfig:
        for s in self.sources:
            if s.name == name:
                return s
        raise KeyError(f"no source named {name!r}; sources: {[s.name for s in self.sources]}")

    def with_overrides(self, **changes) -> "Settings":
        return replace(self, **changes)


def parse_start(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def _parse_options(text: str) -> dict[str, str]:
    pairs = [p for p in text.split(",") if p.strip()]
    return dict(p.split("=", 1) for p in pairs)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    home = Path(env.get("CDC_ASSETS_HOME", ".cdc_assets")).absolute()
    source = SourceConfig(
        name=env.get("CDC_ASSETS_SOURCE", "sample"),
        protocol=env.get("CDC_ASSETS_PROTOCOL", "canal-json"),
        input_path=env.get("CDC_ASSETS_INPUT", str(home / "sample" / "dump")),
        layout=env.get("CDC_ASSETS_LAYOUT", "auto"),
        options=_parse_options(env.get("CDC_ASSETS_OPTIONS", "")),
        time_zone=env.get("CDC_ASSETS_TIME_ZONE", "UTC"),
    )
    return Settings(
        home=home,
        warehouse=Path(env.get("CDC_ASSETS_WAREHOUSE", str(home / "warehouse"))).absolute(),
        sources=(source,),
        partition_start=parse_start(env.get("CDC_ASSETS_START", DEFAULT_START)),
        window_minutes=int(env.get("CDC_ASSETS_WINDOW_MINUTES", "60")),
        spark_master=env.get("CDC_ASSETS_SPARK_MASTER", "local[2]"),
    )
