"""Objects written by Confluent's Kafka Connect S3 sink (`io.confluent.connect.s3.S3SinkConnector`):

  [<topics.dir>/]<encoded partition>/<topic>+<kafka partition>+<start offset>[.keys].<ext>

The default partitioner's folder is `<topic>/partition=<p>` (`topics/orders/partition=0/
orders+0+0000000000.json`); the time-based one's is `<topic>/<path.format>` (`year=2026/month=01/
…`). Only the file name matters: topic, partition and the offset of its first record. The k-th
record of an object (0-based) has offset start + k: the sink writes a Kafka partition's records
in offset order, one object after the other.

Formats (`format.class`), by extension:
- ByteArrayFormat `.bin` (`format.bytearray.extension`): each value's bytes followed by the line
  separator (`format.bytearray.separator`, by default the worker's line separator: LF, or CRLF).
  The layout option of that name gives another one (any string, escapes as in the connector's
  config: `\\r\\n`, `|`, `\\u0000`); each value is then exactly the bytes between two separators.
- JsonFormat `.json`: one JSON value per line. A byte-array value (ByteArrayConverter) is a JSON
  string of its base64; a string value (StringConverter) is a JSON string of the text; a value
  the JsonConverter parsed (schemas.enable=false) is a JSON document, kept as its line's text.
- ParquetFormat `[.<codec>].parquet` and AvroFormat `.avro`: records. A record whose one field is
  text or bytes is that value; a record of several fields is passed on as its JSON text.
`.gz` after `.bin`/`.json`: `s3.compression.type=gzip`.

`store.kafka.keys=true` writes each object's keys into `<name>.keys.<ext>` next to it (the
k-th key is the k-th value's): read with the values (Open Protocol needs them), else keys are
null. Kafka timestamps are not in the objects (null). Headers (`.headers.<ext>`) are not read.
"""

from __future__ import annotations

import base64
import functools
import gzip
import io
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession, functions as F, types as T

from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.landing.layouts.base import DumpLayout, SampledMessage, absolute_path, unescaped
from cdc_assets.landing.layouts.line_files import BYTES_AS_TEXT, content_lines, whole_files

# Kafka topic names are [A-Za-z0-9._-]+, so the `+` delimiters (file.delim) are unambiguous.
# Groups: 1 topic, 2 partition, 3 start offset, 4 `.keys`/`.headers`, 5 format extension, 6 `.gz`.
_NAME = (r"([A-Za-z0-9._-]+)\+(\d+)\+(\d+)(\.keys|\.headers)?"
         r"(\.bin|\.json|\.avro|(?:\.(?:snappy|gz|lzo|br|lz4|lz4hadoop|lz4raw|zstd))?\.parquet)(\.gz)?")
_NAME_RE = re.compile(_NAME)
# Any connector object name, whatever its format (`.csv`, `.json.zst`, …).
_ANY_NAME_RE = re.compile(r"[A-Za-z0-9._-]+\+\d+\+\d+(\.[A-Za-z0-9]+)+")
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

#: The connector's option: the string written after each ByteArrayFormat value (and key).
SEPARATOR = "format.bytearray.separator"
#: Its default, the worker's line separator: LF, or CRLF on Windows (both read as lines).
LINE_SEPARATOR = b"\n"

_FILE_ROWS = T.StructType([
    T.StructField("source_file", T.StringType()),
    T.StructField("k", T.LongType()),
    T.StructField("value", T.BinaryType()),
])


def parse_name(name: str) -> dict | None:
    """The parts of a connector object's file name, or None if it is not one that is read."""
    m = _NAME_RE.fullmatch(name)
    if m is None or m.group(4) == ".headers" or (m.group(6) and m.group(5) not in (".bin", ".json")):
        return None
    ext = ".parquet" if m.group(5).endswith(".parquet") else m.group(5)
    return {"topic": m.group(1), "partition": int(m.group(2)), "start_offset": int(m.group(3)),
            "keys": m.group(4) == ".keys", "format": ext, "gzip": m.group(6) is not None}


class KafkaConnectS3Layout(DumpLayout):
    name = "kafka-connect-s3"
    extensions = (".bin", ".json", ".avro", ".parquet", ".gz")
    default_options = {SEPARATOR: LINE_SEPARATOR.decode()}
    # A ByteArray/JSON object is uploaded whole (S3 multipart upload) and never cut; a Parquet
    # object read before its footer is written cannot be read at all.
    cut_files_readable = False

    def __init__(self, options: Mapping[str, str] | None = None):
        super().__init__(options)
        self.separator = _separator_bytes(self.options[SEPARATOR])

    def is_data_file(self, relative: PurePath) -> bool:
        """Value objects and their `.keys` objects (read together)."""
        return super().is_data_file(relative) and parse_name(relative.name) is not None

    def unsupported(self, relative: PurePath) -> str | None:
        """A connector object of a format this layout does not read (CsvFormat, OrcFormat, zstd)."""
        name = relative.name
        if parse_name(name) is not None or _ANY_NAME_RE.fullmatch(name) is None or ".headers." in name:
            return None
        if any(p.startswith(".") for p in relative.parts):
            return None
        return ("a Kafka Connect S3 sink object of a format cdc_assets does not read (it reads ByteArrayFormat "
                ".bin, JsonFormat .json, each optionally .gz, ParquetFormat .parquet and AvroFormat .avro)")

    def sniff(self, root: Path) -> str | None:
        files = self.list_files(root)
        return f"{len(files)} <topic>+<partition>+<start offset> object(s)" if files else None

    def shadowed(self, root: Path) -> tuple[str, ...]:
        """Its objects end in `.json` / `.parquet` / `.bin` as other layouts' files do: it
        overrides them when every file they would read is one of its objects (a mix of both
        stays ambiguous, an error that names them)."""
        from cdc_assets.landing.layouts import LAYOUT_CLASSES  # the registry imports this module

        mine = set(self.list_files(root))
        others = {n for n, lay in LAYOUT_CLASSES.items() if n != self.name and lay.list_files(root)}
        if all(set(LAYOUT_CLASSES[n].list_files(root)) <= mine for n in others):
            return tuple(others)
        return ()

    def is_complete(self, path: Path) -> bool:
        """A Parquet object is whole once its footer is written; a values object whose folder
        has keys objects (store.kafka.keys) waits for its own."""
        if path.name.endswith(".parquet"):
            try:
                pq.read_metadata(path)
            except (OSError, ValueError):
                return False
        parts = parse_name(path.name)
        if parts is None or parts["keys"]:
            return True
        keys = _keys_path(path)
        return keys.is_file() or not any(
            (q := parse_name(p.name)) is not None and q["keys"] for p in path.parent.iterdir())

    def sample(self, files: list[Path], root: Path) -> Iterator[SampledMessage]:
        """As `read`, in plain Python (`cdc-assets inspect`)."""
        for path in files:
            parts = parse_name(path.name)
            if parts["keys"]:
                continue
            keys_file = _keys_path(path)
            keys = dict(_named_records(keys_file, self.separator)) if keys_file.is_file() else {}
            m = _NAME_RE.fullmatch(path.name)
            for k, value in _named_records(path, self.separator):
                yield SampledMessage(m.group(1), int(m.group(2)), int(m.group(3)) + k, None, keys.get(k), value,
                                     str(path))

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        """Values numbered within their object (k), joined with the k-th key of their keys
        object when it is there, offset = start + k."""
        keys_files = [f for f in files if parse_name(f.name)["keys"]]
        value_files = [f for f in files if not parse_name(f.name)["keys"]]
        # A keys object already on disk but landed in an earlier batch (or not new) is still read.
        keys_files += [k for f in value_files if (k := _keys_path(f)).is_file() and k not in keys_files]
        if not value_files:  # keys objects alone: read with their values
            return spark.createDataFrame([], RAW_MESSAGE_SCHEMA)
        values = _records(spark, value_files, self.separator)
        if keys_files:
            keys = _records(spark, keys_files, self.separator).select(
                F.regexp_replace("source_file", r"\.keys(\.[^/]*)$", "$1").alias("source_file"), "k",
                F.col("value").alias("key"))
            values = values.join(keys, ["source_file", "k"], "left")
        else:
            values = values.withColumn("key", F.lit(None).cast("binary"))
        name = F.regexp_extract(absolute_path(F.col("source_file")), r"([^/]*)$", 1)
        part = functools.partial(F.regexp_extract, name, f"^{_NAME}$")
        return values.select(
            part(1).alias("topic"),
            part(2).cast("int").alias("kafka_partition"),
            (part(3).cast("long") + F.col("k")).alias("kafka_offset"),
            F.lit(None).cast("timestamp").alias("kafka_timestamp"),
            "key", "value", "source_file",
        ).select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields])


def _separator_bytes(text: str) -> bytes:
    """The option's text as the connector writes it (its UTF-8 bytes)."""
    separator = unescaped(text, f"layout kafka-connect-s3: option {SEPARATOR}")
    if not separator:
        raise ValueError(f"layout kafka-connect-s3: option {SEPARATOR} is empty; values run together "
                         "without one and cannot be read apart")
    return separator.encode("utf-8")


def _unreadable(source: str, exc: Exception) -> ValueError:
    """An object that cannot be read (bad gzip, not Avro or Parquet), named with the topic,
    partition and first offset its name gives: the library's own error names none of them."""
    path = unquote(re.sub(r"^file:/*", "/", source)) if source.startswith("file:") else source
    parts = parse_name(PurePath(path).name) or {}
    return ValueError(f"{path}: cannot read this Kafka Connect S3 {'keys ' if parts.get('keys') else ''}object "
                      f"(topic {parts.get('topic')}, partition {parts.get('partition')}, records from offset "
                      f"{parts.get('start_offset')}): {type(exc).__name__}: {exc}")


def _named_records(path: Path, separator: bytes) -> list[tuple[int, bytes | None]]:
    try:
        return _python_records(path, separator)
    except Exception as exc:  # any library's error, re-raised naming the object
        raise _unreadable(str(path), exc) from exc


def _python_records(path: Path, separator: bytes = LINE_SEPARATOR) -> list[tuple[int, bytes | None]]:
    """(k, value) of one object in plain Python: what `_records` gives for it."""
    fmt = parse_name(path.name)["format"]
    if fmt == ".parquet":
        table = pq.read_table(path)
        names = table.column_names
        one = len(names) == 1 and (pa.types.is_string(table.schema.field(0).type)
                                   or pa.types.is_binary(table.schema.field(0).type))
        rows = table.column(0).to_pylist() if one else [
            json.dumps(r, default=str, separators=(",", ":")) for r in table.to_pylist()]
        return [(k, v.encode("utf-8") if isinstance(v, str) else v) for k, v in enumerate(rows)]
    content = path.read_bytes()
    if fmt == ".avro":
        import fastavro

        return [(k, _avro_value(r)) for k, r in enumerate(fastavro.reader(io.BytesIO(content)))]
    if parse_name(path.name)["gzip"]:
        content = gzip.decompress(content)
    if fmt == ".bin" and separator != LINE_SEPARATOR:
        return [(k, piece) for k, piece in enumerate(content.split(separator)) if piece]
    lines = [(k, line.removesuffix(b"\r")) for k, line in enumerate(content.split(b"\n"))]
    lines = [(k, line) for k, line in lines if line.strip()]
    return [(k, _python_json_value(line) if fmt == ".json" else line) for k, line in lines]


def _python_json_value(line: bytes) -> bytes | None:
    """`_json_value` in plain Python."""
    if line == b"null":
        return None
    if line.startswith(b'"'):
        try:
            text = json.loads(line)
        except ValueError:
            return line
        if isinstance(text, str):
            if re.fullmatch(_BASE64, text):
                return base64.b64decode(text)
            return text.encode("utf-8")
    return line


def _keys_path(values: Path) -> Path:
    """Where the connector writes the keys of a values object (`….keys.<ext>`)."""
    m = _NAME_RE.fullmatch(values.name)
    return values.with_name(values.name[:m.end(3)] + ".keys" + values.name[m.end(3):])


def _records(spark: SparkSession, files: list[Path], separator: bytes = LINE_SEPARATOR) -> DataFrame:
    """`source_file` (Spark's file URI), `k` (the record's position in its object), `value`."""
    by_format: dict[tuple[str, bool], list[Path]] = {}
    for f in files:
        parts = parse_name(f.name)
        by_format.setdefault((parts["format"], parts["gzip"]), []).append(f)
    frames = []
    for (fmt, gz), group in sorted(by_format.items()):
        if fmt == ".parquet":
            frames.append(_parquet_records(spark, group))
        elif fmt == ".avro":
            frames.append(whole_files(spark, group).mapInArrow(_avro_batches, _FILE_ROWS))
        else:
            contents = whole_files(spark, group)
            if gz:
                contents = contents.mapInArrow(_gunzip_batches, contents.schema)
            lines = content_lines(contents) if fmt == ".json" else _separated(contents, separator)
            value = _json_value(F.col("line")) if fmt == ".json" else F.col("line")
            frames.append(lines.select("source_file", F.col("line_no").cast("long").alias("k"), value.alias("value")))
    return functools.reduce(DataFrame.unionByName, frames)


def _separated(contents: DataFrame, separator: bytes) -> DataFrame:
    """ByteArrayFormat values as `content_lines` gives lines: the pieces between separators,
    numbered by position (k), the empty ones (after the last separator) left out."""
    if separator == LINE_SEPARATOR:
        return content_lines(contents)  # LF or CRLF, blank lines skipped
    # Each byte as `\xhh` (one character per byte in BYTES_AS_TEXT): no regex meaning.
    pattern = "".join(f"\\x{b:02x}" for b in separator)
    pieces = contents.select(
        "source_file",
        F.posexplode(F.split(F.decode("content", BYTES_AS_TEXT), pattern, -1)).alias("line_no", "text"))
    return pieces.where(F.length("text") > 0).select(
        "source_file", "line_no", F.encode("text", BYTES_AS_TEXT).alias("line"))


def _json_value(line: Column) -> Column:
    """A JsonFormat line as the value's bytes: a JSON string is base64 (ByteArrayConverter) or
    text (StringConverter), `null` a null value, a document its own text."""
    text = F.decode(line, "UTF-8")
    string = F.get_json_object(F.concat(F.lit('{"v":'), text, F.lit("}")), "$.v")
    is_string = text.startswith('"') & string.isNotNull()
    return (F.when(text == "null", F.lit(None).cast("binary"))
            .when(is_string & string.rlike(_BASE64), F.try_to_binary(string, F.lit("base64")))
            .when(is_string, F.encode(string, "UTF-8"))
            .otherwise(line))


def _parquet_records(spark: SparkSession, files: list[Path]) -> DataFrame:
    """Parquet objects grouped by schema (each group's value column chosen from its fields)."""
    groups: dict[tuple, list[Path]] = {}
    for path in files:
        schema = pq.read_schema(path)
        groups.setdefault(tuple(zip(schema.names, map(str, schema.types))), []).append(path)
    frames = []
    for fields, group in groups.items():
        df = spark.read.parquet(*[str(p) for p in group])
        frames.append(df.select(
            F.col("_metadata.file_path").alias("source_file"),
            F.col("_metadata.row_index").cast("long").alias("k"),
            _record_value(df, [name for name, _ in fields]).alias("value"),
        ))
    return functools.reduce(DataFrame.unionByName, frames)


def _record_value(df: DataFrame, names: list[str]) -> Column:
    """The one text or bytes field of a record, else the record as JSON text."""
    if len(names) == 1 and isinstance(df.schema[names[0]].dataType, (T.StringType, T.BinaryType)):
        return F.col(names[0]).cast("binary")
    return F.encode(F.to_json(F.struct(*[F.col(n) for n in names])), "UTF-8")


def _gunzip(content: bytes | None, source: str) -> bytes | None:
    try:
        return None if content is None else gzip.decompress(content)
    except Exception as exc:  # BadGzipFile, EOFError, zlib.error: named
        raise _unreadable(source, exc) from exc


def _gunzip_batches(batches):
    for batch in batches:
        contents = [_gunzip(c, source) for c, source in zip(batch.column("content").to_pylist(),
                                                            batch.column("source_file").to_pylist())]
        yield pa.RecordBatch.from_arrays([pa.array(contents, pa.binary()), batch.column("source_file")],
                                         names=["content", "source_file"])


def _avro_value(record) -> bytes | None:
    if isinstance(record, dict) and len(record) == 1:
        record = next(iter(record.values()))  # a one-field record (the keys' `key` envelope too)
    if record is None or isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode("utf-8")
    return json.dumps(record, default=str, separators=(",", ":")).encode("utf-8")


def _avro_batches(batches):
    import fastavro  # on the executors

    for batch in batches:
        files, ks, values = [], [], []
        for content, source in zip(batch.column("content").to_pylist(), batch.column("source_file").to_pylist()):
            try:
                for k, record in enumerate(fastavro.reader(io.BytesIO(content))):
                    files.append(source)
                    ks.append(k)
                    values.append(_avro_value(record))
            except Exception as exc:  # not Avro, or cut short: named
                raise _unreadable(source, exc) from exc
        yield pa.RecordBatch.from_arrays(
            [pa.array(files, pa.string()), pa.array(ks, pa.int64()), pa.array(values, pa.binary())],
            names=["source_file", "k", "value"])


__all__ = ["SEPARATOR", "KafkaConnectS3Layout", "parse_name"]
