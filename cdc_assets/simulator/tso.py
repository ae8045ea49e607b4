"""TiDB TSO arithmetic (pure Python twin of `cdc_assets.common.tso`, which needs Spark).

A TSO is `(physical_ms << 18) | logical`: commit timestamps, watermarks and checkpoints
are all TSOs, and the consumer compares them as plain integers.
"""

from __future__ import annotations

PHYSICAL_SHIFT = 18
LOGICAL_MASK = (1 << PHYSICAL_SHIFT) - 1


def make_tso(physical_ms: int, logical: int = 0) -> int:
    if not 0 <= logical <= LOGICAL_MASK:
        raise ValueError(f"logical part {logical} out of range")
    return (physical_ms << PHYSICAL_SHIFT) | logical


def tso_physical_ms(tso: int) -> int:
    return tso >> PHYSICAL_SHIFT


def tso_logical(tso: int) -> int:
    return tso & LOGICAL_MASK
