"""Mutation fuzzing: 100k damaged messages, mixed with untouched ones, through every decoder.

Properties, for every decoder:
- decoding never raises;
- every input message comes out, as decoded events or quarantine rows (nothing vanishes);
- every quarantine row has a snake_case reason code and a detail;
- every decoded event of a damaged message still meets the change-log contract;
- untouched messages decode exactly as they do without damaged neighbours.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from pyspark.sql import DataFrame, functions as F

from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA, REJECT_REASON, conform
from cdc_assets.decode import get_decoder
from cdc_assets.simulator.protocols import ENCODERS
from cdc_assets_tests.fuzz.corpus import (
    JSON_DECODERS,
    Corpus,
    conformance_json_messages,
    conformance_open_protocol,
    raw_messages,
    simulated_corpus,
)
from cdc_assets_tests.fuzz.mutator import mutate
from cdc_assets_tests.fuzz.properties import assert_decoder_properties, decode_like_the_asset

MUTANTS_PER_SIMULATED = 14_000  # x 6 encoders
MUTANTS_CONFORMANCE = 16_000  # captured JSON (decoded by each JSON decoder) and Open Protocol
MUTANT_TOPIC, CONTROL_TOPIC = "mutant", "control"


@pytest.fixture(scope="module")
def corpora(spark, tmp_path_factory, conformance) -> dict[str, Corpus]:
    out = {e: simulated_corpus(spark, tmp_path_factory.mktemp(e), e) for e in ENCODERS}
    captured = conformance_json_messages(conformance)
    for decoder in JSON_DECODERS:
        out[f"conformance/{decoder}"] = Corpus("json", decoder, {}, captured)
    out["conformance/open-protocol"] = Corpus("open-protocol", "open-protocol", {},
                                              conformance_open_protocol(conformance))
    return out


def _mutants(corpus: Corpus, n: int, seed: str) -> tuple[list, Counter]:
    rng = random.Random(seed)
    mutants, kinds = [], Counter()
    for _ in range(n):
        message, kind = mutate(rng, rng.choice(corpus.seeds), corpus.wire)
        mutants.append(message)
        kinds[kind] += 1
    return mutants, kinds


def _comparable(df: DataFrame) -> list[tuple]:
    """Rows as sortable tuples (maps as sorted entries), lineage topic left out."""
    cols = [c for c in df.columns if c != "topic"]
    rows = df.select(*cols).collect()
    def norm(v):
        if isinstance(v, dict):
            return tuple(sorted(v.items()))
        if isinstance(v, list):
            return tuple(v)
        return v
    return sorted((tuple(norm(r[c]) for c in cols) for r in rows), key=repr)


def _fuzz(spark, corpus: Corpus, n: int, name: str) -> dict:
    decoder = get_decoder(corpus.decoder, corpus.options or None)
    mutants, kinds = _mutants(corpus, n, f"fuzz/{name}")
    raw = raw_messages(spark, mutants, MUTANT_TOPIC).unionByName(
        raw_messages(spark, corpus.seeds, CONTROL_TOPIC, offset_base=10_000_000))
    out = decode_like_the_asset(decoder, raw).persist()
    try:
        decoded = assert_decoder_properties(raw, out, decoder, name)
        rejected = out.where(F.col(REJECT_REASON).isNotNull())
        alone = decode_like_the_asset(decoder, raw_messages(spark, corpus.seeds, CONTROL_TOPIC, 10_000_000))
        alone = conform(alone.where(F.col(REJECT_REASON).isNull()), CHANGE_LOG_SCHEMA)
        mixed = decoded.where(F.col("topic") == CONTROL_TOPIC)
        assert _comparable(mixed) == _comparable(alone)

        reasons = {r[0]: r[1] for r in rejected.where(F.col("topic") == MUTANT_TOPIC)
                   .groupBy(REJECT_REASON).count().collect()}
        quarantined_msgs = rejected.where(F.col("topic") == MUTANT_TOPIC).select("kafka_offset").distinct().count()
        return {"mutants": n, "quarantined_messages": quarantined_msgs, "reasons": reasons, "kinds": dict(kinds)}
    finally:
        out.unpersist()


@pytest.mark.slow
@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_simulated_messages_survive_mutation(spark, corpora, encoder):
    stats = _fuzz(spark, corpora[encoder], MUTANTS_PER_SIMULATED, encoder)
    # Damage is noticed: most byte-level damage to a message must be quarantined.
    assert stats["quarantined_messages"] > MUTANTS_PER_SIMULATED * 0.2, stats
    print(encoder, stats)


@pytest.mark.slow
@pytest.mark.parametrize("name", [f"conformance/{d}" for d in JSON_DECODERS] + ["conformance/open-protocol"])
def test_captured_messages_survive_mutation(spark, corpora, name):
    n = MUTANTS_CONFORMANCE // (len(JSON_DECODERS) + 1)
    stats = _fuzz(spark, corpora[name], n, name)
    assert stats["quarantined_messages"] > 0, stats
    print(name, stats)
