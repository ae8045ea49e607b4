"""Decode alone, per protocol: the simulator encodes one workload in every protocol it knows
(Spark's Kafka-source Parquet layout), and each protocol's decoder runs over its own dump
with a noop sink (`benchmarks.engines.cdc_decode_protocol`).

The dumps differ in size per protocol (Debezium's envelope carries a schema, Open Protocol
batches events, DTS is binary Avro), so rates are given per Kafka message and per MB.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from cdc_assets.simulator import generate
from cdc_assets.simulator.protocols import ENCODERS

ROW_CHANGES = 100_000


def protocol_dump(protocol: str, cache: Path, seed: int, row_changes: int = ROW_CHANGES) -> Path:
    """The cached simulator dump of one protocol (generated once; `_DONE` marks it complete)."""
    root = Path(cache) / "protocols" / f"{protocol}-changes={row_changes}-seed={seed}"
    if (root / "_DONE").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    dump = generate(root, protocol=protocol, row_changes=row_changes, seed=seed, restart=False,
                    layout="kafka-parquet", overwrite=True)
    values = pq.read_table([str(f) for f in dump.files], columns=["value"]).column("value")
    info = {"protocol": protocol, "decoder": ENCODERS[protocol].decoder, "counts": dump.counts,
            "value_bytes": pc.sum(pc.binary_length(values)).as_py() or 0}
    (root / "info.json").write_text(json.dumps(info))
    (root / "_DONE").touch()
    return root


def protocols() -> list[str]:
    return sorted(ENCODERS)


def dump_info(root: Path) -> dict:
    return json.loads((Path(root) / "info.json").read_text())
