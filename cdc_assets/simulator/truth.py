"""The true table states a correct consumer must reproduce, per fixed time window.

Window k covers commit times [k * window_ms, (k+1) * window_ms) (aligned to the epoch);
its state is every transaction with commit physical ms < end applied in commit order.
Windows run from the one holding the first row change to the one holding the last, empty
ones in between included. A window is `complete` when the final watermark of the dump
reaches its end (ts >= end << 18); only complete windows may be materialized.

Snapshots are spilled to temporary files as each window closes, so memory stays at one
copy of the tables even for large runs.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from cdc_assets.simulator.schema import TableDef
from cdc_assets.simulator.tso import make_tso, tso_physical_ms
from cdc_assets.simulator.values import canonical_text
from cdc_assets.simulator.workload import DELETE, Event, Transaction

_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class TruthRecorder:
    def __init__(self, tables: Iterable[TableDef], *, window_ms: int = 3_600_000):
        self.tables = {t.full_name: t for t in tables}
        self.window_ms = window_ms
        self.row_changes = 0
        self.transactions = 0
        # table -> typed primary key -> canonical row; typed keys sort numerically.
        self._state: dict[str, dict[tuple, list]] = {name: {} for name in self.tables}
        self._tmp = tempfile.TemporaryDirectory(prefix="cdc-sim-truth-")
        self._windows: list[tuple[int, int, Path]] = []
        self._window_start: int | None = None

    def add(self, event: Event) -> None:
        if not isinstance(event, Transaction):
            return  # DDL does not change table contents here (CREATE only)
        physical = tso_physical_ms(event.commit_ts)
        if self._window_start is None:
            self._window_start = physical // self.window_ms * self.window_ms
        while physical >= self._window_start + self.window_ms:
            self._close_window()
        self.transactions += 1
        for change in event.changes:
            name = f"{change.database}.{change.table}"
            table = self.tables[name]
            state = self._state[name]
            if change.op == DELETE:
                del state[table.pk_values(change.before)]
            else:
                row = change.after
                state[table.pk_values(row)] = [canonical_text(c, row[c.name]) for c in table.columns]
            self.row_changes += 1

    def _close_window(self) -> None:
        start = self._window_start
        end = start + self.window_ms
        path = Path(self._tmp.name) / f"{start}.json"
        with path.open("w", encoding="utf-8") as f:
            f.write("{")
            for i, (name, state) in enumerate(self._state.items()):
                f.write(("," if i else "") + _DUMPS(name) + ":[")
                f.write(",".join(_DUMPS(state[k]) for k in sorted(state)))
                f.write("]")
            f.write("}")
        self._windows.append((start, end, path))
        self._window_start = end

    def write(self, path: Path, *, final_watermark_ts: int | None, header: dict) -> list[dict]:
        """Close the last window and write truth.json; returns the windows' summaries."""
        if self._window_start is not None:
            self._close_window()
        summaries = []
        with Path(path).open("w", encoding="utf-8") as f:
            f.write("{\n")
            for k, v in {"window_ms": self.window_ms, **header, "final_watermark_ts": final_watermark_ts}.items():
                f.write(f"{_DUMPS(k)}: {_DUMPS(v)},\n")
            f.write('"tables": {\n')
            f.write(",\n".join(f"{_DUMPS(name)}: {_DUMPS(_table_meta(t))}" for name, t in self.tables.items()))
            f.write('\n},\n"windows": [\n')
            for i, (start, end, part) in enumerate(self._windows):
                complete = final_watermark_ts is not None and final_watermark_ts >= make_tso(end)
                summaries.append({"start_ms": start, "end_ms": end, "complete": complete})
                f.write(("," if i else "") + f'{{"start_ms":{start},"end_ms":{end},"complete":{_DUMPS(complete)},"tables":')
                with part.open("r", encoding="utf-8") as src:
                    shutil.copyfileobj(src, f)
                f.write("}\n")
            f.write("]\n}\n")
        self._tmp.cleanup()
        return summaries


def states_at(events: Iterable[Event], tables: Iterable[TableDef], tsos: Iterable[int]) -> dict[int, dict[str, list]]:
    """Brute force: for each TSO T, every table's rows after every transaction with
    commit_ts <= T, applied in commit order (rows as truth.json writes them)."""
    wanted = sorted(set(tsos))
    recorder = TruthRecorder(tables, window_ms=1 << 62)  # one window: only its live state is read
    out: dict[int, dict[str, list]] = {}

    def take(tso: int) -> None:
        out[tso] = {name: [state[k] for k in sorted(state)] for name, state in recorder._state.items()}

    for event in events:
        while wanted and isinstance(event, Transaction) and event.commit_ts > wanted[0]:
            take(wanted.pop(0))
        recorder.add(event)
    for tso in wanted:
        take(tso)
    recorder._tmp.cleanup()
    return out


def _table_meta(t: TableDef) -> dict:
    return {
        "columns": list(t.column_names),
        "types": {c.name: c.mysql_type for c in t.columns},
        "primary_key": list(t.primary_key),
        "nullable": [c.name for c in t.columns if c.nullable],
    }
