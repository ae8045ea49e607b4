"""`kcat -C -J` output: one JSON record per line with topic, partition, offset, ts, key, payload.

kcat writes the key and payload bytes as they are, escaping only `"`, `\` and bytes below
0x20, so binary messages (Open Protocol frames, Avro) survive it too: a line that is not
valid UTF-8 is read one character per byte. A line that is not a kcat record is kept
(value = the line's exact bytes) under partition -1 and quarantined downstream.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.landing.layouts.base import (UNPARSED_TOPIC, DumpLayout, SampledMessage, python_unparsed_offset,
                                         unparsed_offset)
from cdc_assets.landing.layouts.line_files import BYTES_AS_TEXT, file_lines, python_lines

_KCAT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("ts", T.LongType()),
        T.StructField("key", T.StringType()),
        T.StructField("payload", T.StringType()),
    ]
)

_GLUED = '}{"topic":'
# Spark's JSON reader (Jackson) refuses a string longer than 20,000,000 characters: a larger
# payload came out null (read as an empty message) or the record as no record at all. Size is
# judged by the decoders (`max-message-bytes`), with the message's bytes, not here.
_READ_OPTIONS = {"maxStringLen": str((1 << 31) - 1)}
_RECORD_START = r'(?<=\})(?=\{"topic":)'
_TAIL_LIMIT = 64 << 20  # a record's end is looked for this far back (Kafka messages are smaller)


def _last_record(path: Path) -> bytes | None:
    """The bytes after the file's last LF or last record boundary (`}{"topic":`); None when
    there is none within _TAIL_LIMIT of the end (no record is that long)."""
    glued = _GLUED.encode()
    with path.open("rb") as f:
        end = f.seek(0, os.SEEK_END)
        chunks: list[bytes] = []  # read backwards; each searched with the start of the next
        pos = end
        while pos > 0 and end - pos < _TAIL_LIMIT:
            step = min(pos, 1 << 16)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            window = chunk + (chunks[-1][:len(glued) - 1] if chunks else b"")
            cut = max(window.rfind(b"\n"), window.rfind(glued))
            if cut >= 0:
                return (chunk + b"".join(reversed(chunks)))[cut + 1:]  # window is a prefix of this
            chunks.append(chunk)
        return b"".join(reversed(chunks)) if pos == 0 else None

# A Kafka timestamp outside 1970..2200 is garbage (and a huge one overflows Spark's
# timestamp): the message is kept with a null timestamp.
_MIN_TS_MS = 0
_END_TS_MS = int(dt.datetime(2201, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)


def _record(text: str, utf8: bool) -> tuple | None:
    """(topic, partition, offset, ts ms, key, payload) of one kcat record, or None."""
    try:
        r = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(r, dict) or not isinstance(r.get("topic"), str):
        return None
    partition, offset, ts = r.get("partition"), r.get("offset"), r.get("ts")
    if type(partition) is not int or type(offset) is not int:
        return None
    encoding = "UTF-8" if utf8 else BYTES_AS_TEXT
    try:
        key, payload = (v.encode(encoding) if isinstance(v, str) else None for v in (r.get("key"), r.get("payload")))
    except UnicodeEncodeError:  # an escape beyond a byte in a line read per byte: not a record
        return None
    ts_ok = type(ts) is int and _MIN_TS_MS <= ts < _END_TS_MS
    return r["topic"], partition, offset, ts if ts_ok else None, key, payload


class KcatJsonlLayout(DumpLayout):
    name = "kcat-jsonl"
    extensions = (".jsonl", ".json")

    def is_complete(self, path: Path) -> bool:
        """kcat ends every record with its delimiter (LF unless `-D`); its output is buffered,
        so a file being written may end in part of a record: a `{` that does not parse yet.
        No prefix of a JSON object is one, and anything else at the end is a line like any
        other (quarantined if it is not a record)."""
        tail = _last_record(path)
        if tail is None:
            return False
        text = tail.decode("utf-8", errors="replace").strip()  # binary payloads
        if not text.startswith("{"):
            return True
        try:
            json.loads(text)
        except ValueError:
            return False
        return True

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        # kcat writes key and payload bytes as they are (yajl escapes only `"`, `\` and bytes
        # below 0x20), so a binary message makes its line invalid UTF-8. Such a line is read
        # one character per byte and its key and payload turned back into those bytes.
        utf8 = F.is_valid_utf8(F.col("line").cast("string"))
        text = F.when(utf8, F.col("line").cast("string")).otherwise(F.decode("line", BYTES_AS_TEXT))
        # Records run together on one line (a file joined to one that lacked its last LF, or
        # kcat -D ''): JSON would read the first and drop the rest. Inside a JSON string every
        # `"` is escaped, so an unescaped `{"topic":` after a `}` starts a record.
        glued = text.contains(_GLUED)
        pieces = F.when(glued, F.split(text, _RECORD_START)).otherwise(F.array(text))
        parsed = file_lines(spark, files).select(
            "*", utf8.alias("utf8"), glued.alias("glued"), F.posexplode(pieces).alias("piece", "text"),
        ).withColumn("r", F.from_json("text", _KCAT_SCHEMA, _READ_OPTIONS))
        r, utf8 = F.col("r"), F.col("utf8")

        def as_bytes(column):
            return F.when(utf8, F.encode(column, "UTF-8")).otherwise(F.encode(column, BYTES_AS_TEXT))

        # In a line read per byte, an escape beyond U+00FF (which kcat never writes) has no
        # byte: such a line is not a record (and encoding it would fail).
        beyond_a_byte = F.concat_ws("", r["key"], r["payload"]).rlike(r"[^\x00-\xFF]")
        ok = (r.isNotNull() & r["topic"].isNotNull() & r["partition"].isNotNull() & r["offset"].isNotNull()
              & (utf8 | ~F.coalesce(beyond_a_byte, F.lit(False))))
        ts_ok = ok & (r["ts"] >= _MIN_TS_MS) & (r["ts"] < _END_TS_MS)
        return parsed.select(
            F.when(ok, r["topic"]).otherwise(F.lit(UNPARSED_TOPIC)).alias("topic"),
            F.when(ok, r["partition"]).otherwise(F.lit(-1)).alias("kafka_partition"),
            # An unparsable line gets a stable pseudo-offset (re-landing stays idempotent) that
            # includes its position, so identical garbage lines are not taken for redeliveries,
            # and keeps its line number, so errors can name it.
            F.when(ok, r["offset"]).otherwise(unparsed_offset(
                F.when(F.col("glued"), F.xxhash64("source_file", "line_no", "line", "piece"))
                .otherwise(F.xxhash64("source_file", "line_no", "line")), F.col("line_no"))).alias("kafka_offset"),
            F.when(ts_ok, F.timestamp_millis(r["ts"])).alias("kafka_timestamp"),
            F.when(ok, as_bytes(r["key"])).alias("key"),
            # not a record: the exact bytes of its line (or of its piece of a line)
            F.when(ok, as_bytes(r["payload"])).otherwise(as_bytes(F.col("text"))).alias("value"),
            "source_file",
        ).select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields])

    def sample(self, files: list[Path], root: Path) -> Iterator[SampledMessage]:
        """As `read`: a line that is not a record keeps its bytes under partition -1."""
        for path in files:
            for line_no, line in python_lines(path):
                try:
                    text, utf8 = line.decode("UTF-8"), True
                except UnicodeDecodeError:
                    text, utf8 = line.decode(BYTES_AS_TEXT), False
                pieces = re.split(_RECORD_START, text) if _GLUED in text else [text]
                for piece_no, piece in enumerate(pieces):
                    r = _record(piece, utf8)
                    if r is None:
                        pseudo = python_unparsed_offset(zlib.crc32(f"{path}:{line_no}:{piece_no}".encode()), line_no)
                        raw = piece.encode("UTF-8" if utf8 else BYTES_AS_TEXT)
                        yield SampledMessage(UNPARSED_TOPIC, -1, pseudo, None, None, raw, str(path))
                    else:
                        yield SampledMessage(*r, str(path))
