"""`commit-time=kafka-timestamp`: commit times for producers that write none.

Flink CDC's Kafka pipeline sink writes canal-json without `es`, `ts`, `id`, `mysqlType` or
DDL, and debezium-json without `ts_ms`, `source.ts_ms` or a binlog position. With this
option every row and DDL event takes its Kafka record's timestamp as commit time
(`ms << 18`) and its offset as source position: the landing routes the message by that
timestamp, and within one millisecond the events keep Kafka order.

What it cannot guarantee: there is no total order across partitions. Offsets order one
partition; across partitions only the record timestamps (the producer's clock, or the
broker's with LogAppendTime) tell, so two changes of one key in different partitions within
one millisecond, or under skewed producer clocks, may be applied in the wrong order. Partition
by primary key or by table (Flink CDC's `partition.strategy`) keeps each key in one
partition. A layout without Kafka timestamps (plain lines, the storage sink) cannot give one:
its events are quarantined as `missing_commit_ts`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.common.tso import MAX_TSO_MS, PHYSICAL_SHIFT, tso_time_col
from cdc_assets.contracts.schemas import DDL, REJECT_DETAIL, REJECT_REASON, ROW

OPTION = "commit-time"
MESSAGE, KAFKA_TIMESTAMP = "message", "kafka-timestamp"
CHOICES = (MESSAGE, KAFKA_TIMESTAMP)
#: The commit_ts a Python decoder gives an event whose time will come from Kafka: never kept
#: (`with_kafka_commit_time` replaces it; 0 would be quarantined as implausible anyway).
PENDING = 0
NO_TIMESTAMP = ("missing_commit_ts", "commit-time=kafka-timestamp, but the message has no Kafka timestamp "
                "(its layout carries none: use kcat JSON lines or Kafka Parquet)")
#: What a missing commit time means without the option (appended to the decoders' details).
HINT = ("; a producer that writes no event time (Flink CDC's Kafka pipeline sink) needs the option "
        "commit-time=kafka-timestamp")
ORDER = {
    MESSAGE: "the producer's commit time, then its source position (binlog / batch id), then Kafka order",
    KAFKA_TIMESTAMP: "Kafka record timestamp, then partition offset (commit-time=kafka-timestamp): "
                     "a total order within each partition only, none across partitions",
}


def kafka_ms() -> Column:
    return F.unix_millis(F.col("kafka_timestamp"))


def with_kafka_commit_time(decoded: DataFrame) -> DataFrame:
    """Row and DDL events: commit_ts from the Kafka timestamp, source_position = offset."""
    ms = kafka_ms()
    is_event = F.col("event_kind").isin(ROW, DDL)
    usable = (ms > 0) & (ms < MAX_TSO_MS)
    commit_ts = F.when(is_event, F.when(usable, F.shiftleft(ms, PHYSICAL_SHIFT))).otherwise(F.col("commit_ts"))
    unset = is_event & F.col(REJECT_REASON).isNull() & ~F.coalesce(usable, F.lit(False))
    return decoded.withColumns({
        "commit_ts": commit_ts,
        "commit_time": tso_time_col(commit_ts),
        "source_position": F.when(is_event, F.col("kafka_offset")).otherwise(F.col("source_position")),
        REJECT_REASON: F.when(unset, F.lit(NO_TIMESTAMP[0])).otherwise(F.col(REJECT_REASON)),
        REJECT_DETAIL: F.when(unset, F.lit(NO_TIMESTAMP[1])).otherwise(F.col(REJECT_DETAIL)),
    })
