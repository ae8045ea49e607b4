"""Project settings from the environment, with embedded defaults that need nothing else.

Defaults: everything under `./.cdc_assets` (sample dump, landing area, warehouse), one
source `sample` reading TiCDC Canal-JSON from the shipped simulator's dump, hourly
commitTs windows starting 2026-01-01 UTC, local Spark.

A source's input and the warehouse are each a local folder or `s3://bucket/prefix`. The
warehouse's catalog is Iceberg's JDBC catalog on SQLite by default, or a REST, Glue or Hive
catalog (`catalog_type`, `catalog_uri`, `catalog_properties`; docs/deploying.md "Catalogs and
S3"). S3 credentials are never settings: they come from the environment (AWS_ACCESS_KEY_ID,
... or an instance role).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import yaml

from cdc_assets.common.jvm_archive import configured_archive
from cdc_assets.common.warehouse import HOME_WAREHOUSE, SECRET_KEY, WORK_FOLDER, Warehouse, sqlite_catalog_uri

DEFAULT_START = "2026-01-01T00:00"


@dataclass(frozen=True)
class SourceConfig:
    """One declared source. `protocol`, `layout` and `completeness` are names of the stages'
    registries, which common does not know: landing/source_config.py turns them into the
    registries' enums, or fails naming the known ones, when the definitions load."""

    name: str
    protocol: str  # a decoder's name (decode.Protocol)
    input_path: str  # a local folder or s3://bucket/prefix
    layout: str = "auto"  # auto | a layout's name (landing.layouts.Layout: kafka-parquet, kcat-jsonl, ...)
    options: Mapping[str, str] = field(default_factory=dict)  # the decoder's
    # The layout's, in the writer's own names (`format.bytearray.separator`: landing/layouts).
    layout_options: Mapping[str, str] = field(default_factory=dict)
    time_zone: str = "UTC"  # the changefeed's time zone, for TIMESTAMP columns
    # How a window is known to be complete: auto (watermarks when the protocol has them,
    # else event time), watermark, event-time or batch (the dump is complete).
    completeness: str = "auto"
    allowed_lateness_seconds: int = 0  # event-time mode only
    # Share of a window's messages that may be quarantined before the ERROR check fails.
    max_quarantine_rate: float = 0.01


@dataclass(frozen=True)
class Settings:
    home: Path
    warehouse: Path | str  # a local folder (a Path) or the text s3://bucket/prefix
    sources: tuple[SourceConfig, ...]
    partition_start: datetime
    window_minutes: int = 60
    # local[N] (default), spark://host:port (standalone cluster) or sc://host:port (Spark Connect).
    spark_master: str = "local[2]"
    spark_conf: Mapping[str, str] = field(default_factory=dict)  # extra Spark settings, win over ours
    s3_endpoint_url: str | None = None  # S3-compatible store (MinIO, moto); None = AWS
    s3_region: str | None = None
    s3_path_style: bool | None = None  # None: path-style requests exactly when s3_endpoint_url is set
    # The warehouse's Iceberg catalog: jdbc (default), rest, glue or hive. The URI of a jdbc
    # catalog defaults to SQLite `<warehouse>/catalog.db`, or `<home>/catalog.db` for an s3
    # warehouse (a SQLite file cannot live in a bucket).
    catalog_type: str = "jdbc"
    catalog_uri: str | None = None
    catalog_properties: Mapping[str, str] = field(default_factory=dict)  # extra catalog properties
    # Class-data-sharing archive mapped by the local driver JVM when the file exists
    # (common/jvm_archive.py); None: never.
    jvm_archive: str | None = None
    # A dump file cut short is waited for while it changed this recently (landing/land.py);
    # a replay, which reads a finished dump, waits for none.
    settle_seconds: int = 600
    # Table maintenance keeps the Iceberg snapshots of the last N days (and every tagged one).
    snapshot_retention_days: int = 7

    @property
    def iceberg_warehouse(self) -> Warehouse:
        """The warehouse with its catalog and S3 settings: what Spark and pyiceberg open."""
        uri = self.catalog_uri
        if uri is None and self.catalog_type == "jdbc" and str(self.warehouse).startswith("s3://"):
            uri = sqlite_catalog_uri(self.home)
        return Warehouse(str(self.warehouse), catalog_type=self.catalog_type, catalog_uri=uri,
                         catalog_properties=tuple(self.catalog_properties.items()),
                         s3_endpoint=self.s3_endpoint_url, s3_region=self.s3_region, s3_path_style=self.s3_path_style,
                         work_dir=str(self.home / WORK_FOLDER) if str(self.warehouse).startswith("s3://") else None)

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


#: Options whose value is a comma list: in `k=v,k=v` text, a piece without `=` continues it.
_LIST_OPTIONS = frozenset({"primary-key"})


def _parse_options(text: str) -> dict[str, str]:
    """`k1=v1,k2=v2` -> dict, names and values stripped. Only a list option's value may hold
    commas (`primary-key=order_id,line,time-zone=UTC`); any other piece without `=` is an error."""
    options: dict[str, str] = {}
    last = None
    for piece in text.split(","):
        name, sep, value = piece.partition("=")
        if sep:
            last = name.strip()
            options[last] = value.strip()
        elif last in _LIST_OPTIONS:
            options[last] += "," + piece.strip()  # an empty piece stays, for the option to reject
        elif piece.strip():
            raise ValueError(f"options {text!r}: {piece.strip()!r} is not name=value")
    return options


def _option_text(value) -> str:
    """A YAML option value as the decoder reads it: a bool as true/false, a list as `a,b`, a
    mapping as `k:v;k:v` (`primary-key: {shop.items: [order_id, line]}`), null as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(_option_text(v) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}:{_option_text(v)}" for k, v in value.items())
    return str(value)


def _location(text: str, base: Path, home: Path) -> str:
    """A local folder (relative to `base`) or an s3:// URI, kept as written."""
    text = text.replace("${CDC_ASSETS_HOME}", str(home))
    if text.startswith("s3://"):
        return text
    location = Path(text)
    return str(location if location.is_absolute() else (base / location).absolute())


CATALOG_PROPERTIES_VARIABLE = "CDC_ASSETS_CATALOG_PROPERTIES"


def env_catalog_properties(env: Mapping[str, str]) -> dict[str, str]:
    """The extra catalog properties of the environment (`k=v,k=v`)."""
    return _parse_options(env.get(CATALOG_PROPERTIES_VARIABLE, ""))


def warehouse_location(text: str | Path) -> Path | str:
    """The warehouse setting: an s3:// URI as text (no trailing slash), else an absolute Path."""
    text = str(text)
    if text.startswith("s3://"):
        return text.rstrip("/")
    if "://" in text:
        raise ValueError(f"warehouse {text!r}: a local folder or s3://bucket/prefix (s3a:// is Hadoop's "
                         "scheme; Iceberg's S3FileIO takes s3://)")
    return Path(text).absolute()


def _flag(value, name: str) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("true", "1", "yes"):
        return True
    if str(value).strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _common(env: Mapping[str, str], data: Mapping) -> dict:
    """Settings shared by every source: Spark, the S3 endpoint and the catalog (env wins over
    the file)."""
    conf = {str(k): str(v) for k, v in (data.get("spark_conf") or {}).items()}
    conf.update(_parse_options(env.get("CDC_ASSETS_SPARK_CONF", "")))
    catalog_properties = {str(k): str(v) for k, v in (data.get("catalog_properties") or {}).items()}
    secret = sorted(k for k in catalog_properties if SECRET_KEY.search(k))
    if secret:  # a file is shown and copied around; the Dagster resource config shows the rest
        raise ValueError(f"catalog_properties {secret} may hold secrets: set them in the environment "
                         "(CDC_ASSETS_CATALOG_PROPERTIES), not in the sources file")
    catalog_properties.update(env_catalog_properties(env))
    return {
        "catalog_type": str(env.get("CDC_ASSETS_CATALOG_TYPE", data.get("catalog_type")) or "jdbc").lower(),
        "catalog_uri": env.get("CDC_ASSETS_CATALOG_URI", data.get("catalog_uri")) or None,
        "catalog_properties": catalog_properties,
        "s3_path_style": _flag(env.get("CDC_ASSETS_S3_PATH_STYLE", data.get("s3_path_style")), "s3_path_style"),
        "spark_master": env.get("CDC_ASSETS_SPARK_MASTER", data.get("spark_master", "local[2]")),
        "spark_conf": conf,
        "s3_endpoint_url": env.get("CDC_ASSETS_S3_ENDPOINT_URL", data.get("s3_endpoint_url")) or None,
        "s3_region": env.get("CDC_ASSETS_S3_REGION", data.get("s3_region")) or None,
        "jvm_archive": configured_archive(env),
        "settle_seconds": _not_negative(
            env.get("CDC_ASSETS_SETTLE_SECONDS", data.get("settle_seconds", 600)), "settle_seconds"),
        "snapshot_retention_days": _not_negative(
            env.get("CDC_ASSETS_SNAPSHOT_RETENTION_DAYS", data.get("snapshot_retention_days", 7)),
            "snapshot_retention_days"),
    }


def _not_negative(value, name: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(f"{name} must be 0 or more, got {value!r}")
    return number


def _positive(value, name: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(f"{name} must be a positive number of rows, got {value!r}")
    return number


def load_sources_file(path: Path, home: Path) -> tuple[dict, tuple[SourceConfig, ...]]:
    """A YAML file declaring the sources (see docs/configuration.md); relative locations
    are relative to the file."""
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with a `sources:` list, got {type(data).__name__}")
    unknown = set(data) - _TOP_KEYS
    if unknown:  # a typo (`window_minute:`) would silently keep the default
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(_TOP_KEYS)}")
    sources = []
    for raw in data.get("sources", []):
        unknown = set(raw) - _SOURCE_KEYS
        if unknown:
            raise ValueError(f"{path}: source {raw.get('name')!r} has unknown keys {sorted(unknown)}")
        sources.append(SourceConfig(
            name=str(raw["name"]), protocol=str(raw["protocol"]),
            input_path=_location(str(raw["location"]), path.parent, home),
            layout=str(raw.get("layout", "auto")),
            options={str(k): _option_text(v) for k, v in (raw.get("options") or {}).items()},
            layout_options={str(k): _option_text(v) for k, v in (raw.get("layout_options") or {}).items()},
            time_zone=str(raw.get("time_zone", "UTC")),
            completeness=str(raw.get("completeness", "auto")),
            allowed_lateness_seconds=int(raw.get("allowed_lateness_seconds", 0)),
            max_quarantine_rate=quarantine_rate(raw.get("max_quarantine_rate", 0.01)),
        ))
    names = [s.name for s in sources]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"{path}: source names must be present and unique, got {names}")
    return data, tuple(sources)


_TOP_KEYS = {"sources", "warehouse", "start", "window_minutes", "spark_master", "spark_conf", "s3_endpoint_url",
             "s3_region", "s3_path_style", "catalog_type", "catalog_uri", "catalog_properties", "settle_seconds",
             "snapshot_retention_days"}
_SOURCE_KEYS = {"name", "protocol", "location", "layout", "layout_options", "options", "time_zone",
                "completeness", "allowed_lateness_seconds", "max_quarantine_rate"}


def quarantine_rate(value) -> float:
    rate = float(value)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"max_quarantine_rate must be between 0 and 1, got {value!r}")
    return rate


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    home = Path(env.get("CDC_ASSETS_HOME", ".cdc_assets")).absolute()
    if env.get("CDC_ASSETS_SOURCES"):
        data, sources = load_sources_file(Path(env["CDC_ASSETS_SOURCES"]).absolute(), home)
        return _checked(Settings(
            home=home,
            warehouse=warehouse_location(env.get("CDC_ASSETS_WAREHOUSE", data.get("warehouse", home / HOME_WAREHOUSE))),
            sources=sources,
            partition_start=parse_start(str(env.get("CDC_ASSETS_START", data.get("start", DEFAULT_START)))),
            window_minutes=int(env.get("CDC_ASSETS_WINDOW_MINUTES", data.get("window_minutes", 60))),
            **_common(env, data),
        ))
    source = SourceConfig(
        name=env.get("CDC_ASSETS_SOURCE", "sample"),
        protocol=env.get("CDC_ASSETS_PROTOCOL", "canal-json"),
        input_path=env.get("CDC_ASSETS_INPUT", str(home / "sample" / "dump")),
        layout=env.get("CDC_ASSETS_LAYOUT", "auto"),
        options=_parse_options(env.get("CDC_ASSETS_OPTIONS", "")),
        layout_options=_parse_options(env.get("CDC_ASSETS_LAYOUT_OPTIONS", "")),
        time_zone=env.get("CDC_ASSETS_TIME_ZONE", "UTC"),
        completeness=env.get("CDC_ASSETS_COMPLETENESS", "auto"),
        allowed_lateness_seconds=int(env.get("CDC_ASSETS_ALLOWED_LATENESS_SECONDS", "0")),
        max_quarantine_rate=quarantine_rate(env.get("CDC_ASSETS_MAX_QUARANTINE_RATE", "0.01")),
    )
    return _checked(Settings(
        home=home,
        warehouse=warehouse_location(env.get("CDC_ASSETS_WAREHOUSE", str(home / HOME_WAREHOUSE))),
        sources=(source,),
        partition_start=parse_start(env.get("CDC_ASSETS_START", DEFAULT_START)),
        window_minutes=int(env.get("CDC_ASSETS_WINDOW_MINUTES", "60")),
        **_common(env, {}),
    ))


def _checked(settings: Settings) -> Settings:
    """An invalid catalog setting (a REST catalog without URI, an unknown type, an S3
    credential among the catalog properties, ...) fails when the settings load."""
    settings.iceberg_warehouse
    return settings
