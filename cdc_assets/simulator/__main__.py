"""`python -m cdc_assets.simulator OUT_DIR [--rows N] [--layout L] [--seed S]`"""

from __future__ import annotations

import argparse
import json
import time

from cdc_assets.simulator import LAYOUTS, generate
from cdc_assets.simulator.protocols import ENCODERS
from cdc_assets.simulator.workload import DEFAULT_DURATION_MS, DEFAULT_ROW_CHANGES, DEFAULT_START_MS


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m cdc_assets.simulator", description=__doc__)
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rows", type=int, default=DEFAULT_ROW_CHANGES, help="row changes before duplication")
    p.add_argument("--layout", choices=LAYOUTS, default="kafka-parquet")
    p.add_argument("--protocol", choices=sorted(ENCODERS), default="canal-json")
    p.add_argument("--start-ms", type=int, default=DEFAULT_START_MS)
    p.add_argument("--duration-ms", type=int, default=DEFAULT_DURATION_MS)
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--window-ms", type=int, default=3_600_000)
    p.add_argument("--no-restart", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    dump = generate(
        a.out_dir, seed=a.seed, layout=a.layout, protocol=a.protocol, row_changes=a.rows,
        start_ms=a.start_ms, duration_ms=a.duration_ms, partitions=a.partitions,
        window_ms=a.window_ms, restart=not a.no_restart, overwrite=a.overwrite,
    )
    print(json.dumps({
        "dump_dir": str(dump.dump_dir), "truth": str(dump.truth_path), "files": len(dump.files),
        "counts": dump.counts, "windows": dump.windows, "seconds": round(time.perf_counter() - t0, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
