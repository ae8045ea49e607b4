"""The interface every simulated protocol encoder implements (one module per protocol).

An encoder turns workload events into Kafka (key, value) pairs; it knows nothing about
partitions, offsets or restarts (see `kafka.py`). `build_ms` is the simulated wall
clock when the changefeed builds the message (TiCDC stamps some protocols with it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import ClassVar

from cdc_assets.simulator.schema import TableDef
from cdc_assets.simulator.workload import DdlEvent, RowChange

KeyValue = tuple[bytes | None, bytes]


class Encoder(ABC):
    #: Protocol name as in TiCDC's sink URI (`canal-json`, `open-protocol`, `debezium`).
    name: ClassVar[str]
    #: TiCDC sends Canal-JSON DDL to partition 0 only; some protocols broadcast it.
    ddl_to_all_partitions: ClassVar[bool] = False
    #: The decoder (protocol name, options) that reads this encoding; default (name, {}).
    decoder: ClassVar[tuple[str, dict[str, str]]]
    #: Row events of one partition sent in one message, at most (TiCDC's `max-batch-size`);
    #: an encoder that batches (> 1) implements `merge`.
    batch_events: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "decoder" not in cls.__dict__ and "name" in cls.__dict__:
            cls.decoder = (cls.name, {})

    def __init__(self, tables: Iterable[TableDef], *, time_zone: str = "UTC"):
        self.tables = {(t.database, t.table): t for t in tables}
        #: The changefeed's (TiCDC `--tz`) or MySQL server's zone: TIMESTAMP text is its wall clock.
        self.time_zone = time_zone

    def table(self, database: str, table: str) -> TableDef:
        return self.tables[(database, table)]

    @abstractmethod
    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        """One row change of a transaction committed at `commit_ts` (a TSO)."""

    @abstractmethod
    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        """One DDL statement."""

    def merge(self, messages: list[KeyValue]) -> KeyValue:
        """Several encoded row events of one partition as one batched message."""
        raise NotImplementedError(f"{self.name} does not batch")

    def encode_watermark(self, ts: int, *, build_ms: int) -> KeyValue | None:
        """A watermark / resolved-ts message, or None if the protocol has none."""
        return None
