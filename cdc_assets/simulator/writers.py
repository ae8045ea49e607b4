"""Dump writers: the file layouts people land Kafka topics in.

- `kafka-parquet`: Parquet with exactly Spark's Kafka source schema (what
  `spark.readStream.format("kafka")` hands to a Parquet sink).
- `kcat-jsonl`: the lines `kcat -C -J` prints, one message per line.
- `storage-sink`: TiCDC's storage sink folders (Canal-JSON only; `StorageSinkWriter`).
- `kafka-connect-s3`: Confluent's Kafka Connect S3 sink objects (`KafkaConnectS3Writer`).

The first two stream: one open file per partition, rolled over whenever the Kafka timestamp
enters a new `file_span_ms` bucket, named `<topic>/part-<partition>-<first offset>.<ext>`
(offset zero-padded to 20 digits so that a plain sort is offset order).
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
import zlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_assets.common.tidb_ddl_actions import DDL_ACTIONS
from cdc_assets.simulator.canal_json import DDL_EVENT_TYPES
from cdc_assets.simulator.kafka import KafkaMessage

LAYOUTS = ("kafka-parquet", "kcat-jsonl", "storage-sink", "kafka-connect-s3")
DEFAULT_FILE_SPAN_MS = 30 * 60_000

# org.apache.spark.sql.kafka010 KafkaRecordToRowConverter.kafkaSchema (all nullable).
SPARK_KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        # UTC-adjusted micros: Spark reads it as TimestampType (not TIMESTAMP_NTZ).
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),  # 0 = CreateTime
    ]
)


class DumpWriter(ABC):
    layout: ClassVar[str]

    @abstractmethod
    def write(self, msg: KafkaMessage) -> None: ...

    @abstractmethod
    def close(self) -> list[Path]:
        """Finish every file; the files written, sorted."""


class RollingFileWriter(DumpWriter):
    """One open file per partition, rolled over per `file_span_ms` bucket of Kafka time."""

    extension: ClassVar[str]

    def __init__(self, dump_dir: Path, topic: str, *, file_span_ms: int = DEFAULT_FILE_SPAN_MS):
        self.topic = topic
        self.topic_dir = Path(dump_dir) / topic
        self.topic_dir.mkdir(parents=True, exist_ok=True)
        self.file_span_ms = file_span_ms
        self.files: list[Path] = []
        self._open: dict[int, tuple[int, object]] = {}  # partition -> (time bucket, handle)

    def write(self, msg: KafkaMessage) -> None:
        bucket = msg.timestamp_ms // self.file_span_ms
        current = self._open.get(msg.partition)
        if current is None or current[0] != bucket:
            if current is not None:
                self._close_file(current[1])
            path = self.topic_dir / f"part-{msg.partition}-{msg.offset:020d}.{self.extension}"
            self.files.append(path)
            current = (bucket, self._open_file(path))
            self._open[msg.partition] = current
        self._append(current[1], msg)

    def close(self) -> list[Path]:
        for _, handle in self._open.values():
            self._close_file(handle)
        self._open.clear()
        return sorted(self.files)

    @abstractmethod
    def _open_file(self, path: Path) -> object: ...

    @abstractmethod
    def _append(self, handle, msg: KafkaMessage) -> None: ...

    @abstractmethod
    def _close_file(self, handle) -> None: ...


class _ParquetFile:
    ROW_GROUP = 50_000

    def __init__(self, path: Path, topic: str):
        self.writer = pq.ParquetWriter(path, SPARK_KAFKA_SCHEMA, compression="snappy")
        self.topic = topic
        self._reset()

    def _reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.partitions: list = []
        self.offsets: list = []
        self.timestamps: list = []

    def append(self, msg: KafkaMessage) -> None:
        self.keys.append(msg.key)
        self.values.append(msg.value)
        self.partitions.append(msg.partition)
        self.offsets.append(msg.offset)
        self.timestamps.append(msg.timestamp_ms * 1000)
        if len(self.offsets) >= self.ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        n = len(self.offsets)
        if not n:
            return
        s = SPARK_KAFKA_SCHEMA
        table = pa.Table.from_arrays(
            [
                pa.array(self.keys, s.field("key").type),
                pa.array(self.values, s.field("value").type),
                pa.array([self.topic] * n, s.field("topic").type),
                pa.array(self.partitions, s.field("partition").type),
                pa.array(self.offsets, s.field("offset").type),
                pa.array(self.timestamps, s.field("timestamp").type),
                pa.array([0] * n, s.field("timestampType").type),
            ],
            schema=s,
        )
        self.writer.write_table(table)
        self._reset()

    def close(self) -> None:
        self.flush()
        self.writer.close()


class KafkaParquetWriter(RollingFileWriter):
    layout = "kafka-parquet"
    extension = "parquet"

    def _open_file(self, path: Path) -> _ParquetFile:
        return _ParquetFile(path, self.topic)

    def _append(self, handle: _ParquetFile, msg: KafkaMessage) -> None:
        handle.append(msg)

    def _close_file(self, handle: _ParquetFile) -> None:
        handle.close()


# kcat builds its JSON with yajl: only '"', '\' and control characters are escaped
# (upper-case hex); payload bytes are otherwise copied verbatim.
_YAJL_ESCAPE_RE = re.compile(rb'["\\\x00-\x1f]')
_YAJL_SHORT = {b'"': b'\\"', b"\\": b"\\\\", b"\b": b"\\b", b"\f": b"\\f", b"\n": b"\\n", b"\r": b"\\r", b"\t": b"\\t"}


def _yajl_escape(m: re.Match) -> bytes:
    c = m.group(0)
    return _YAJL_SHORT.get(c) or b"\\u%04X" % c[0]


def kcat_json_string(raw: bytes | None) -> bytes:
    if raw is None:
        return b"null"
    return b'"' + _YAJL_ESCAPE_RE.sub(_yajl_escape, raw) + b'"'


class KcatJsonlWriter(RollingFileWriter):
    layout = "kcat-jsonl"
    extension = "jsonl"

    def _open_file(self, path: Path):
        return path.open("wb")

    def _append(self, handle, msg: KafkaMessage) -> None:
        handle.write(
            b'{"topic":%s,"partition":%d,"offset":%d,"tstype":"create","ts":%d,"broker":-1,"key":%s,"payload":%s}\n'
            % (
                json.dumps(self.topic, ensure_ascii=False).encode("utf-8"),
                msg.partition,
                msg.offset,
                msg.timestamp_ms,
                kcat_json_string(msg.key),
                kcat_json_string(msg.value),
            )
        )

    def _close_file(self, handle) -> None:
        handle.close()


# Canal-JSON DDL type -> TiDB action code (the first action of that type), for schema files.
_CODES = {name: code for code, name in DDL_ACTIONS.items()}
_ACTION_CODES = {t: _CODES[a] for a, t in reversed(DDL_EVENT_TYPES.items())}


class StorageSinkWriter(DumpWriter):
    """TiCDC's storage sink with canal-json (`enable-tidb-extension=true`), from the Canal-JSON
    messages: each table's rows in `<db>/<table>/<table version>/CDC<n>.json` (CRLF lines; the
    version is the commit ts of the table's last DDL), every DDL only as a schema file
    (`<db>[/<table>]/meta/schema_<ts>_<checksum>.json`), watermarks only as the `metadata`
    checkpoint. A re-sent row (the restart) starts the next data file, as a restarted sink
    does. Written at the dump folder's root, which is the sink's."""

    layout = "storage-sink"

    def __init__(self, dump_dir: Path, topic: str = "", *, file_span_ms: int = DEFAULT_FILE_SPAN_MS):
        self.root = Path(dump_dir)  # (no topic folder, no time-based files: the sink has neither)
        self.root.mkdir(parents=True, exist_ok=True)
        self.files: list[Path] = []
        self._versions: dict[tuple[str, str], int] = {}
        self._data: dict[tuple[str, str, int], tuple[int, int]] = {}  # table version -> (file number, last ts)
        self._lines: dict[Path, list[bytes]] = {}
        self._checkpoint: int | None = None

    def write(self, msg: KafkaMessage) -> None:
        m = json.loads(msg.value)
        ts = (m.get("_tidb") or {}).get("commitTs")
        if m["type"] == "TIDB_WATERMARK":
            self._checkpoint = max(self._checkpoint or 0, m["_tidb"]["watermarkTs"])
        elif m["isDdl"]:
            self._schema_file(m, ts)
        else:
            name = (m["database"], m["table"])
            version = self._versions.get(name, 0)
            number, last = self._data.get((*name, version), (1, 0))
            number += ts < last  # older than the file's last row: re-sent after a restart
            self._data[(*name, version)] = (number, ts)
            path = self.root / name[0] / name[1] / str(version) / f"CDC{number:06d}.json"
            self._lines.setdefault(path, []).append(msg.value)

    def _schema_file(self, m: dict, ts: int) -> None:
        database, table = m["database"], m["table"] or ""
        query = m["sql"]
        words = query.upper().split()[:2]
        action = _ACTION_CODES.get(m["type"], {"CREATE": 1, "DROP": 2}.get(words[0], 0)
                                   if words[1:] in (["DATABASE"], ["SCHEMA"]) else 0)
        definition = {"Table": table, "Schema": database, "Version": 1, "TableVersion": ts, "Query": query,
                      "Type": action, "TableColumns": None, "TableColumnsTotal": 0}
        folder = self.root / database / table / "meta" if table else self.root / database / "meta"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"schema_{ts}_{zlib.crc32(query.encode()):010d}.json"
        path.write_text(json.dumps(definition, indent=4))
        self.files.append(path)
        if table:
            self._versions[(database, table)] = ts

    def close(self) -> list[Path]:
        for path, lines in self._lines.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(line + b"\r\n" for line in lines))
            self.files.append(path)
        self._lines.clear()
        (self.root / "metadata").write_text(json.dumps({"checkpoint-ts": self._checkpoint or 0}))
        return sorted(self.files)


class KafkaConnectS3Writer(DumpWriter):
    """Confluent's S3 sink with the default partitioner: per Kafka partition, objects of
    `flush_size` records, `topics/<topic>/partition=<p>/<topic>+<p>+<start offset:010d>.<ext>`,
    values (and with `store_keys`, keys in `<name>.keys.<ext>`) as `fmt` writes them with the
    ByteArrayConverter:
    - `json` (JsonFormat): one JSON value per line (LF), bytes as a base64 string, null as `null`;
    - `bin` (ByteArrayFormat): the raw bytes, each followed by `separator`;
    - `parquet` / `avro` (ParquetFormat / AvroFormat): a record with one bytes field per value.
    `gzip` (`s3.compression.type=gzip`, json and bin only) appends `.gz`."""

    layout = "kafka-connect-s3"

    def __init__(self, dump_dir: Path, topic: str, *, file_span_ms: int = DEFAULT_FILE_SPAN_MS, fmt: str = "json",
                 flush_size: int = 200, store_keys: bool = True, gzip: bool = False, separator: bytes = b"\n"):
        self.topic, self.fmt, self.flush_size, self.store_keys = topic, fmt, flush_size, store_keys
        self.gzip, self.separator = gzip, separator
        self.root = Path(dump_dir) / "topics" / topic
        self.files: list[Path] = []
        self._open: dict[int, tuple[int, list[KafkaMessage]]] = {}  # partition -> (start offset, records)

    def write(self, msg: KafkaMessage) -> None:
        start, records = self._open.setdefault(msg.partition, (msg.offset, []))
        records.append(msg)
        if len(records) >= self.flush_size:
            self._commit(msg.partition)

    def close(self) -> list[Path]:
        for partition in list(self._open):
            self._commit(partition)
        return sorted(self.files)

    def _commit(self, partition: int) -> None:
        start, records = self._open.pop(partition)
        folder = self.root / f"partition={partition}"
        folder.mkdir(parents=True, exist_ok=True)
        ext = "." + self.fmt + (".gz" if self.gzip else "")
        stem = f"{self.topic}+{partition}+{start:010d}"
        views = [("", [m.value for m in records])] + ([(".keys", [m.key for m in records])] if self.store_keys else [])
        for view, values in views:
            path = folder / f"{stem}{view}{ext}"
            content = self._encode(values)
            path.write_bytes(gzip.compress(content) if self.gzip else content)
            self.files.append(path)

    def _encode(self, values: list[bytes | None]) -> bytes:
        if self.fmt == "json":
            return b"".join((b"null" if v is None else json.dumps(base64.b64encode(v).decode()).encode()) + b"\n"
                            for v in values)
        if self.fmt == "bin":
            return b"".join(v + self.separator for v in values)
        if self.fmt == "parquet":
            sink = io.BytesIO()
            pq.write_table(pa.table({"value": pa.array(values, pa.binary())}), sink)
            return sink.getvalue()
        if self.fmt == "avro":
            import fastavro

            sink = io.BytesIO()
            schema = {"type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro",
                      "fields": [{"name": "value", "type": ["null", "bytes"], "default": None}]}
            fastavro.writer(sink, fastavro.parse_schema(schema), [{"value": v} for v in values])
            return sink.getvalue()
        raise ValueError(f"unknown Kafka Connect S3 format {self.fmt!r}")


WRITERS: dict[str, type[DumpWriter]] = {w.layout: w for w in (KafkaParquetWriter, KcatJsonlWriter, StorageSinkWriter,
                                                                KafkaConnectS3Writer)}


def make_writer(layout: str, dump_dir: Path, topic: str, *, file_span_ms: int = DEFAULT_FILE_SPAN_MS,
                **options) -> DumpWriter:
    """`options`: the writer's own (KafkaConnectS3Writer's format, flush size, keys, gzip)."""
    try:
        cls = WRITERS[layout]
    except KeyError:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}") from None
    return cls(dump_dir, topic, file_span_ms=file_span_ms, **options)
