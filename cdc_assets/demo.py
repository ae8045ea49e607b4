"""`make demo`: simulate the sample dump (once), replay it through Dagster, print a summary."""

from __future__ import annotations

import json
import sys

from cdc_assets.common.settings import load_settings
from cdc_assets.replay import default_instance, replay
from cdc_assets.simulator.compare import compare_window, load_truth
from cdc_assets.snapshot.store import list_manifests, read_manifest

SAMPLE_SEED = 7


def run_demo() -> int:
    from cdc_assets.simulator import generate

    settings = load_settings()
    source = settings.sources[0]
    sample = settings.home / "sample"
    truth_path = sample / "truth.json"
    if not truth_path.exists():
        print(f"generating the sample dump (seed {SAMPLE_SEED}) into {sample}", file=sys.stderr)
        generate(sample, seed=SAMPLE_SEED, layout="kafka-parquet")
    summary = replay(settings, source.name, default_instance())

    windows = list_manifests(settings.iceberg_warehouse, source.name)
    if not windows:
        print("no window was materialized", file=sys.stderr)
        return 1
    manifest = read_manifest(settings.iceberg_warehouse, source.name, windows[-1])
    truth = load_truth(truth_path)
    verdict = compare_window(settings.iceberg_warehouse, source.name, manifest, truth, windows[-1])
    print(f"\nsnapshots at the end of window starting {windows[-1]} ms ({len(windows)} windows materialized):")
    print(f"{'table':<28} {'rows':>7} {'cols':>5}  {'vs truth':<10} Iceberg table @ tag")
    for tid, t in sorted(manifest.tables.items()):
        name = f"{t.database}.{t.table}"
        print(f"{name:<28} {t.rows:>7} {len(t.schema['columns']):>5}  "
              f"{verdict.get(name, 'n/a'):<10} {t.identifier} @ {manifest.tag}")
    matches = all(v == "ok" for v in verdict.values())
    print(f"\nmatches the simulator's truth: {'yes' if matches else 'NO'}")
    print(json.dumps(summary.as_json(), sort_keys=True))
    return 0 if matches and summary.ok else 1
