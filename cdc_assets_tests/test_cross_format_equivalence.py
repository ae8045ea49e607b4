"""Cross-format equivalence: the simulator encodes one workload in every protocol it knows;
each encoding, replayed through Dagster with the decoder (and options) its encoder names,
reconstructs the truth at every materialized window. Different protocols run on different
seeds, so together they cover several workloads.

Each replay is also read the way a user reads it (`tables_as_of`, as `export --as-of`): at
every window's UTC end time and at instants inside windows, against a brute-force replay of
the workload. Open Protocol batches straddle window ends (the simulator's watermarks are
off the window ends for it) and run in both Kafka layouts."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from cdc_assets.common.windows import ROUTED_WINDOWS
from cdc_assets.landing.tables import LANDED_MESSAGES, read_landed
from cdc_assets.simulator.compare import load_truth
from cdc_assets.simulator.protocols import ENCODERS
from cdc_assets_tests.e2e import differences_at_instants, differences_from_truth, simulate_and_replay

HOUR = 3_600_000
PROTOCOLS = sorted(set(ENCODERS) - {"canal-json"})  # canal-json: test_end_to_end
pytestmark = pytest.mark.slow


CASES = [(seed, protocol, "kafka-parquet") for seed, protocol in enumerate(PROTOCOLS, start=21)]
CASES.append((40, "open-protocol", "kcat-jsonl"))  # seeds 25 and 40: batches straddle window ends


@pytest.mark.parametrize("seed, protocol, layout", CASES)
def test_encoding_reconstructs_the_truth(tmp_path, spark, seed, protocol, layout):
    decoder, options = ENCODERS[protocol].decoder
    dump, summary, settings = simulate_and_replay(
        tmp_path, seed=seed, layout=layout, row_changes=500, duration_ms=int(2.5 * HOUR),
        protocol=protocol, decoder=decoder, options=options,
    )
    truth = load_truth(dump.truth_path)
    assert summary.ok, summary.checks_failed
    assert summary.quarantined == 0
    # Watermark protocols close exactly the truth's complete windows; event-time ones may
    # hold back the last of them (no watermark says it is over).
    complete = sum(w["complete"] for w in truth["windows"])
    assert complete - 1 <= summary.windows <= complete and summary.windows >= 1
    assert differences_from_truth(settings, dump.truth_path) == {}
    if protocol == "open-protocol":  # the case this checks: batches landed in two windows
        landed = read_landed(spark, settings.warehouse, "src", LANDED_MESSAGES)
        assert landed.where(F.col(ROUTED_WINDOWS).isNotNull()).count() >= 2
    assert differences_at_instants(spark, settings, dump.truth_path, seed=seed) == {}
