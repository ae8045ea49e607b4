"""TiCDC storage sink (canal-json):

  <root>/metadata                                   {"checkpoint-ts": <tso>}
  <root>/<schema>/<table>/<table-version>[/<partition>][/<date>]/CDC[_<dispatcher>_]<n>.json   rows
  <root>/<schema>/<table>/meta/schema_<version>_<checksum>.json                a table's DDL
  <root>/<schema>/meta/schema_<version>_<checksum>.json                        a database's DDL
  <root>/<schema>/<table>/<table-version>/schema.json   a table's DDL (TiCDC v6.5.0 to v6.5.2)
  .../meta/CDC.index                                (not needed)

The storage sink writes DDL only as schema files: a table definition, the statement (`Query`),
its commit ts (`TableVersion`) and TiDB's action code (`Type`). Each schema file with a
statement becomes one canal-json DDL message (`_tidb.commitTs` = TableVersion, `type` = TiDB's
action name), so a TRUNCATE, DROP or RENAME reaches the snapshots as it does through Kafka.
A schema file without a statement is not an event: the definition of a table that existed
when the changefeed started (or restarted), or the other table of an EXCHANGE PARTITION (rows
carry their own types and key). A schema file that is not readable JSON of that shape is
passed on as it is, so the decoder quarantines it.

Only data files and those schema files are read; the `meta` folder under a table version
(its index) is skipped (a database or table may itself be named `meta`, or start with `_`).
Rows of the same millisecond as a DDL are ordered after it only when they carry `_tidb.commitTs`
(`enable-tidb-extension=true`, which TiCDC's own storage tests set): without it their commit
ts is `es << 18`, below the DDL's exact one.

Each data folder is one ordered stream (each dispatcher's files one: `/CDC_<dispatcher>` is
added to the folder): topic = its path below the root (without the partition folder),
partition = the partition folder's number (0 without one), offset = (file number << 24) | line.
`<schema>[/<table>]/meta` is the stream of the table's (or database's) DDL, in commit order:
partition 0, offset = TableVersion. The checkpoint-ts is a watermark for every stream.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path, PurePath

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.common.tidb_ddl_actions import DDL_ACTIONS
from cdc_assets.common.tso import tso_ms_col, tso_to_ms
from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.landing.layouts.base import DumpLayout, SampledMessage, is_hidden_name, relative_path
from cdc_assets.landing.layouts.line_files import LINE_BITS, python_lines, read_line_files, whole_files

# CDC<n>.json, or CDC_<dispatcher>_<n>.json when one table is written from several nodes
# (TiCDC's `enable-table-across-nodes`): each dispatcher's files are a stream of their own.
_DATA_FILE = r"^CDC(?:_(.+)_)?(\d+)\.json$"
_DATA_FILE_NAME = re.compile(_DATA_FILE)
# The storage sink names its files after the protocol: `.csv` for protocol=csv.
_CSV_DATA_FILE_NAME = re.compile(_DATA_FILE.replace(r"\.json$", r"\.csv$"))
# TiCDC's own test of a schema file's name (pkg/sink/cloudstorage: `meta/schema_\d+_\d{10}\.json$`).
_SCHEMA_FILE_NAME = re.compile(r"schema_\d+_\d{10}\.json")
_OLD_SCHEMA_FILE_NAME = "schema.json"  # in the table version's folder, up to TiCDC v6.5.2
_SCHEMA_FILE_FIELDS = T.StructType([
    T.StructField("Schema", T.StringType()),
    T.StructField("Table", T.StringType()),
    T.StructField("TableVersion", T.LongType()),
    T.StructField("Query", T.StringType()),
    T.StructField("Type", T.IntegerType()),
])


def _is_schema_file(relative: PurePath) -> bool:
    """`<schema>/meta/<name>` (a database's DDL), `<schema>/<table>/meta/<name>` (a table's) or
    `<schema>/<table>/<version>/schema.json`."""
    parts = relative.parts
    if len(parts) == 4 and parts[3] == _OLD_SCHEMA_FILE_NAME:
        return parts[2].isascii() and parts[2].isdigit()
    return len(parts) in (3, 4) and parts[-2] == "meta" and _SCHEMA_FILE_NAME.fullmatch(parts[-1]) is not None


def _hidden_below_root(relative: PurePath) -> bool:
    """Hidden names anywhere; Spark's `_` bookkeeping names only below <schema>/<table>,
    since a database or table may have any name (`_temporary`, `_started_jobs`)."""
    return (any(p.startswith(".") for p in relative.parts)
            or any(is_hidden_name(p) for p in relative.parts[2:]))


def _is_row_file(relative: PurePath, name: re.Pattern) -> bool:
    """A data file's name below `<schema>/<table>/<version>`, not in the version's index folder."""
    parts = relative.parts
    in_version_meta = len(parts) > 4 and parts[3] == "meta"  # <schema>/<table>/<version>/meta/...
    return name.fullmatch(relative.name) is not None and not in_version_meta


def _below(path: Path, root: Path) -> PurePath:
    try:
        return Path(path).relative_to(root)
    except ValueError:
        return PurePath(Path(path).name)


class StorageSinkLayout(DumpLayout):
    name = "storage-sink"
    extensions = (".json",)
    shadows = ("kcat-jsonl",)  # its data files are `.json` lines

    def sniff(self, root: Path) -> str | None:
        if (root / "metadata").is_file():
            return "TiCDC storage sink's metadata file"
        return "TiCDC storage sink's schema files" if self.is_present(root) else None

    def is_present(self, root: Path) -> bool:
        """The `metadata` file, or (a database's folders copied without it) a schema file."""
        if (root / "metadata").is_file():
            return True
        patterns = ("*/meta/schema_*.json", "*/*/meta/schema_*.json", f"*/*/*/{_OLD_SCHEMA_FILE_NAME}")
        candidates = (p for pattern in patterns for p in root.glob(pattern))
        return any(p.is_file() and _is_schema_file(p.relative_to(root)) for p in candidates)

    def is_data_file(self, relative: PurePath) -> bool:
        if relative.suffix not in self.extensions or _hidden_below_root(relative):
            return False
        return _is_schema_file(relative) or _is_row_file(relative, _DATA_FILE_NAME)

    def is_bookkeeping(self, relative: PurePath) -> bool:
        """The root `metadata` (its checkpoint is read) and the index files (not needed)."""
        return relative == PurePath("metadata") or relative.name == "CDC.index" or relative.suffix == ".index"

    def reads_other_names(self, path: Path) -> str | None:
        """Rows live at fixed places only: anything else is not read, and named as such."""
        return ("not a storage-sink file: data is <schema>/<table>/<table-version>/[<partition>/][<date>/]"
                "CDC<n>.json, DDL is .../meta/schema_<version>_<checksum>.json")

    def unsupported(self, relative: PurePath) -> str | None:
        """A data file of TiCDC's other storage-sink protocol, csv (`CDC000001.csv`)."""
        if (len(relative.parts) < 4 or _hidden_below_root(relative)
                or not _is_row_file(relative, _CSV_DATA_FILE_NAME)):
            return None
        return ("a TiCDC storage-sink CSV data file (protocol=csv): cdc_assets reads the storage sink's "
                "canal-json files only (protocol=canal-json&enable-tidb-extension=true)")

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        is_schema = {f: _is_schema_file(_below(f, root)) for f in files}
        schema_files = [f for f in files if is_schema[f]]
        row_files = [f for f in files if not is_schema[f]]
        parts = ([_row_messages(spark, row_files, root)] if row_files else []) + (
            [_ddl_messages(spark, schema_files, root)] if schema_files else [])
        return functools.reduce(DataFrame.unionByName, parts)

    def sample(self, files: list[Path], root: Path) -> Iterator[SampledMessage]:
        """As `read`, in plain Python."""
        for path in files:
            rel = _below(path, root)
            if _is_schema_file(rel):
                message = _python_ddl_message(path, rel)
                if message is not None:
                    yield message
                continue
            parts = list(rel.parent.parts)
            partition = int(parts[3]) if len(parts) > 3 and parts[3].isascii() and parts[3].isdigit() else None
            topic = "/".join(parts[:3] + parts[4:] if partition is not None else parts)
            m = _DATA_FILE_NAME.fullmatch(rel.name)
            topic += f"/CDC_{m.group(1)}" if m.group(1) else ""
            for line_no, line in python_lines(path):
                yield SampledMessage(topic, partition or 0, (int(m.group(2)) << LINE_BITS) + line_no,
                                     None, None, line, str(path))

    def checkpoint_ts(self, root: Path) -> int | None:
        meta = root / "metadata"
        if not meta.is_file():
            return None
        try:
            return int(json.loads(meta.read_text())["checkpoint-ts"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{meta}: expected {{\"checkpoint-ts\": <tso>}} ({exc})") from None


def _row_messages(spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
    rel = relative_path(F.col("source_file"), root)
    folder = F.regexp_extract(rel, r"^(.*)/[^/]+$", 1)
    # <schema>/<table>/<version>[/<partition>][/<date>]: a purely numeric 4th part is the partition.
    parts = F.split(folder, "/")
    fourth = F.try_element_at(parts, F.lit(4))
    fourth_number = F.when(fourth.rlike(r"^[0-9]+$"), fourth.try_cast("int"))
    has_partition = fourth_number.isNotNull()
    partition = F.coalesce(fourth_number, F.lit(0))
    topic = F.when(
        has_partition,
        F.concat_ws("/", F.slice(parts, 1, 3), F.slice(parts, 5, 100)),
    ).otherwise(folder)
    name = F.regexp_extract(rel, r"([^/]+)$", 1)
    dispatcher = F.regexp_extract(name, _DATA_FILE, 1)
    topic = F.when(dispatcher != "", F.concat(topic, F.lit("/CDC_"), dispatcher)).otherwise(topic)
    number = F.regexp_extract(name, _DATA_FILE, 2).try_cast("long")
    return read_line_files(spark, files, topic=topic, partition=partition, file_number=number)


def _ddl_messages(spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
    """One canal-json DDL message per schema file with a statement (module docstring)."""
    whole = whole_files(spark, files)
    rel = relative_path(F.col("source_file"), root)
    old_layout = rel.endswith("/" + _OLD_SCHEMA_FILE_NAME)
    # A cast, not decode(): invalid UTF-8 must not fail the landing (the file is quarantined).
    text = F.col("content").cast("string")
    d = F.from_json(text, _SCHEMA_FILE_FIELDS)
    version_in_path = F.regexp_extract(rel, r"(?:schema_|/)(\d+)(?:_\d+\.json|/schema\.json)$", 1)
    version = F.coalesce(d["TableVersion"], version_in_path.try_cast("long"))
    readable = F.is_valid_utf8(text) & F.coalesce(d["Schema"] != "", F.lit(False)) & version.isNotNull()
    has_statement = F.coalesce(d["Query"].rlike(r"\S"), F.lit(False))
    actions = F.create_map(*[F.lit(x) for code, name in DDL_ACTIONS.items() for x in (code, name)])
    message = F.to_json(F.struct(
        F.lit(0).alias("id"),
        d["Schema"].alias("database"),
        d["Table"].alias("table"),
        F.lit(True).alias("isDdl"),
        F.coalesce(F.try_element_at(actions, d["Type"]),
                   F.concat(F.lit("ddl type "), d["Type"].cast("string"))).alias("type"),
        tso_ms_col(version).alias("es"),
        tso_ms_col(version).alias("ts"),
        d["Query"].alias("sql"),
        F.struct(version.alias("commitTs")).alias("_tidb"),
    ))
    return whole.where(~readable | has_statement).select(
        F.when(old_layout, F.concat(F.regexp_extract(rel, r"^([^/]*/[^/]*)/", 1), F.lit("/meta")))
        .otherwise(F.regexp_extract(rel, r"^(.*)/[^/]+$", 1)).alias("topic"),
        F.lit(0).alias("kafka_partition"),
        version.alias("kafka_offset"),
        F.lit(None).cast("timestamp").alias("kafka_timestamp"),
        F.lit(None).cast("binary").alias("key"),
        F.when(readable, F.encode(message, "UTF-8")).otherwise(F.col("content")).alias("value"),
        "source_file",
    ).select(*[F.col(f.name).cast(f.dataType) for f in RAW_MESSAGE_SCHEMA.fields])


def _python_ddl_message(path: Path, rel: PurePath) -> SampledMessage | None:
    """`_ddl_messages` for one schema file: None for a definition without a statement."""
    content = path.read_bytes()
    try:
        d = json.loads(content)
    except (ValueError, RecursionError):
        d = None
    d = d if isinstance(d, dict) else {}
    m = re.search(r"(?:schema_|/)(\d+)(?:_\d+\.json|/schema\.json)$", "/" + rel.as_posix())
    version = d.get("TableVersion") if type(d.get("TableVersion")) is int else int(m.group(1)) if m else None
    readable = isinstance(d.get("Schema"), str) and d["Schema"] != "" and version is not None
    query = d.get("Query") if isinstance(d.get("Query"), str) else ""
    if readable and not query.strip():
        return None
    old_layout = rel.name == _OLD_SCHEMA_FILE_NAME
    topic = "/".join(rel.parts[:2]) + "/meta" if old_layout else rel.parent.as_posix()
    value = content
    if readable:
        code = d.get("Type") if type(d.get("Type")) is int else None
        action = DDL_ACTIONS.get(code) or (None if code is None else f"ddl type {code}")
        message = {"id": 0, "database": d["Schema"], "table": d.get("Table"), "isDdl": True, "type": action,
                   "es": tso_to_ms(version), "ts": tso_to_ms(version), "sql": query, "_tidb": {"commitTs": version}}
        # as Spark's to_json writes it: compact, nulls left out
        value = json.dumps({k: v for k, v in message.items() if v is not None}, separators=(",", ":"),
                           ensure_ascii=False).encode()
    return SampledMessage(topic, 0, version if version is not None else 0, None, None, value, str(path))
