"""Seed messages for fuzzing: the simulated upstream's output for every encoder, and the
real captured messages of ../shared/conformance."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.landing.layouts import read_dump
from cdc_assets.simulator import generate
from cdc_assets.simulator.protocols import ENCODERS

Message = tuple[bytes | None, bytes | None]
JSON_DECODERS = ("canal-json", "debezium", "debezium-json", "cloudcanal-json")


@dataclass(frozen=True)
class Corpus:
    wire: str  # what the bytes are: an encoder name, or "json" for captured JSON messages
    decoder: str
    options: dict[str, str]
    seeds: list[Message]


def simulated_corpus(spark: SparkSession, out: Path, encoder: str) -> Corpus:
    dump = generate(out, seed=11, layout="kafka-parquet", protocol=encoder, row_changes=500,
                    duration_ms=20 * 60_000, restart=False)
    rows = read_dump(spark, dump.files, dump.layout, dump.dump_dir).select("key", "value").collect()
    decoder, options = ENCODERS[encoder].decoder
    return Corpus(encoder, decoder, dict(options or {}), [(r.key, r.value) for r in rows])


def conformance_json_messages(root: Path) -> list[Message]:
    """Every JSON object in the corpus: whole files, or one per line (JSON lines, CRLF)."""
    out: list[Message] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".txt", ".jsonl")):
        data = path.read_bytes()
        try:
            docs = [json.loads(data)]
        except ValueError:
            docs = []
            for line in data.replace(b"\r\n", b"\n").split(b"\n"):
                try:
                    docs.append(json.loads(line))
                except ValueError:
                    continue
        out += [(None, json.dumps(d).encode()) for d in docs if isinstance(d, dict)]
    return out


def conformance_open_protocol(root: Path) -> list[Message]:
    """TiCDC's Java example key/value pairs (binary Open Protocol frames)."""
    base = root / "pingcap+tiflow" / "examples" / "java" / "src" / "test" / "resources" / "data"
    pairs = []
    for key in sorted((base / "key").glob("*_key_*")):
        value = base / "value" / key.name.replace("_key_", "_value_")
        pairs.append((key.read_bytes(), value.read_bytes() if value.exists() else None))
    return pairs


def raw_messages(spark: SparkSession, messages: list[Message], topic: str, offset_base: int = 0) -> DataFrame:
    """One Kafka message per entry, partition 0, offsets from `offset_base`."""
    n = len(messages)
    table = pa.table({
        "topic": pa.array([topic] * n, pa.string()),
        "kafka_partition": pa.array([0] * n, pa.int32()),
        "kafka_offset": pa.array(range(offset_base, offset_base + n), pa.int64()),
        "kafka_timestamp": pa.array([dt.datetime(2026, 1, 1)] * n, pa.timestamp("us", tz="UTC")),
        "key": pa.array([k for k, _ in messages], pa.binary()),
        "value": pa.array([v for _, v in messages], pa.binary()),
        "source_file": pa.array(["fuzz"] * n, pa.string()),
    })
    return spark.createDataFrame(table.select(RAW_MESSAGE_SCHEMA.fieldNames()), RAW_MESSAGE_SCHEMA)
