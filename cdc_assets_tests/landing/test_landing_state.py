"""The landing state's typed records: the JSON document stored in the `landing_state` table
keeps its keys (documents written by landings round-trip byte for byte), one merge of a
partition's counts, and the completeness modes."""

from __future__ import annotations

import json

import pytest

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.landing.state import (
    BatchRecord, BatchStats, Completeness, CompletenessMode, LandingState, PartitionProgress, UnroutableFile,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOUR = 3_600_000

# Documents landings committed (landing_state.state): watermarks moved backwards and implausible,
# an unroutable window; an unparsed line; a partition with no watermark.
STORED = [
    (
        '{"batches":[{"batch_id":"621858d0d2d1efaa-ff0f32dc","files":1,"messages":5,"unroutable_window":17672'
        '25600000,"windows":[1767225600000,1767229200000,1767232800000]},{"batch_id":"eb688c5df9b3c315-a8eb08'
        '76","files":1,"messages":2,"windows":[1767229200000,1767232800000]}],"fingerprints":{"/tmp/pytest-of'
        '-root/pytest-192/popen-gw0/test_backwards_and_implausible0/dump/a.jsonl":{"digest":"ef596a6ba91f696c'
        '5612e1d58224363ffb6aedd6b1f521e0e40b8a61cd8146dd","mtime_ns":1795803719719170499,"size":2141},"/tmp/'
        'pytest-of-root/pytest-192/popen-gw0/test_backwards_and_implausible0/dump/b.jsonl":{"digest":"cbed8af'
        '9467dce19356a6d67ca4b3727bdf1b4fd23eaea8b702afcbf1311fb9f","mtime_ns":1795803722298546841,"size":770'
        '}},"first_unroutable":{"file":"a.jsonl","kafka_offset":4,"kafka_partition":0,"key_first_bytes":"null'
        '","reason":"implausible_time","topic":"cdc","value_first_bytes":"b\'{\\"id\\": 0, \\"database\\": \\"\\"\'"}'
        ',"global_watermark_ts":463269475123200001,"landed_digests":["cbed8af9467dce19356a6d67ca4b3727bdf1b4f'
        'd23eaea8b702afcbf1311fb9f","ef596a6ba91f696c5612e1d58224363ffb6aedd6b1f521e0e40b8a61cd8146dd"],"part'
        'itions":{"cdc/0":{"first_landed_at":1795803722.2758455,"implausible_watermarks":1,"kafka_partition":'
        '0,"max_offset":6,"max_routing_ms":1767232800000,"max_watermark_ts":463269475123200001,"messages":7,"'
        'regressed_watermarks":2,"topic":"cdc","unroutable":{"implausible_time":1},"watermark_since":17958037'
        '23.7997339}},"unroutable_files":{"a.jsonl":{"messages":5,"unroutable":{"implausible_time":1}}},"wind'
        'ow_ms":3600000,"windows":{"1767225600000":2,"1767229200000":3,"1767232800000":2}}'
    ),
    (
        '{"batches":[{"batch_id":"8f4c0b718f95a6f7-1860ac7d","files":1,"messages":2,"unroutable_window":17672'
        '25600000,"windows":[1767225600000]}],"fingerprints":{"/tmp/pytest-of-root/pytest-192/popen-gw0/test_'
        'a_kcat_file_cut_mid_recor0/dump/dump.jsonl":{"digest":"f2405e4eacc4cc1eaf69440496aa294a2096944d5d2cf'
        '0d39ebfa71edb9ba829","mtime_ns":1795803707263169974,"size":622}},"first_unroutable":{"file":"dump.js'
        'onl","kafka_offset":-8505630950984515583,"kafka_partition":-1,"key_first_bytes":"null","line":"line '
        '2","reason":"unparsed_record","topic":"__unparsed__","value_first_bytes":"b\'{\\"topic\\":\\"cdc\\",\\"par'
        'titio\'"},"global_watermark_ts":null,"landed_digests":["f2405e4eacc4cc1eaf69440496aa294a2096944d5d2cf'
        '0d39ebfa71edb9ba829"],"partitions":{"__unparsed__/-1":{"first_landed_at":1795803707.245097,"kafka_pa'
        'rtition":-1,"max_offset":-8505630950984515583,"max_routing_ms":null,"max_watermark_ts":null,"message'
        's":1,"topic":"__unparsed__","unroutable":{"unparsed_record":1}},"cdc/0":{"first_landed_at":179580370'
        '7.245097,"kafka_partition":0,"max_offset":0,"max_routing_ms":1767225600010,"max_watermark_ts":null,"'
        'messages":1,"topic":"cdc"}},"unroutable_files":{"dump.jsonl":{"messages":2,"unroutable":{"unparsed_r'
        'ecord":1}}},"window_ms":3600000,"windows":{"1767225600000":2}}'
    ),
    (
        '{"batches":[],"fingerprints":{},"first_unroutable":null,"global_watermark_ts":463270418841600000,"la'
        'nded_digests":[],"partitions":{"t/0":{"kafka_partition":0,"max_offset":9,"max_routing_ms":1767236400'
        '000,"max_watermark_ts":463270418841600000,"messages":5,"topic":"t"},"t/1":{"kafka_partition":1,"max_'
        'offset":9,"max_routing_ms":1767236400000,"max_watermark_ts":463270418841600000,"messages":5,"topic":'
        '"t"}},"unroutable_files":{},"window_ms":null,"windows":{"1767225600000":10,"1767232800000":5}}'
    ),
]


@pytest.mark.parametrize("document", STORED)
def test_a_stored_document_round_trips_byte_for_byte(document):
    assert LandingState.from_json(json.loads(document)).to_document() == document


def test_a_stored_document_reads_as_typed_records():
    state = LandingState.from_json(json.loads(STORED[0]))
    assert state.partitions["cdc/0"] == PartitionProgress(
        "cdc", 0, messages=7, max_offset=6, max_watermark_ts=463269475123200001, max_routing_ms=T0 + 2 * HOUR,
        unroutable={"implausible_time": 1}, first_landed_at=1795803722.2758455, watermark_since=1795803723.7997339,
        regressed_watermarks=2, implausible_watermarks=1)
    assert state.batches == [
        BatchRecord("621858d0d2d1efaa-ff0f32dc", 1, 5, (T0, T0 + HOUR, T0 + 2 * HOUR), unroutable_window=T0),
        BatchRecord("eb688c5df9b3c315-a8eb0876", 1, 2, (T0 + HOUR, T0 + 2 * HOUR)),
    ]
    assert state.unroutable_files == {"a.jsonl": UnroutableFile(5, {"implausible_time": 1})}
    assert state.whole_unroutable_files() == [] and state.unroutable_messages() == 1
    assert (state.messages(), state.global_watermark_ts()) == (7, 463269475123200001)
    fingerprint = next(iter(state.fingerprints.values()))
    assert (fingerprint.size, fingerprint.digest[:8]) == (2141, "ef596a6b")
    unparsed = LandingState.from_json(json.loads(STORED[1]))
    assert unparsed.unroutable_by_reason() == {"unparsed_record": 1}
    assert [p.key for p in unparsed.kafka_partitions()] == ["cdc/0"]  # the unparsed records' stream is not one


def test_optional_keys_stay_out_of_the_document_until_known():
    p = PartitionProgress("t", 3, messages=2, max_offset=1)
    assert p.to_json() == {"topic": "t", "kafka_partition": 3, "messages": 2, "max_offset": 1,
                           "max_watermark_ts": None, "max_routing_ms": None}
    assert BatchRecord.from_json({"batch_id": "b", "files": 1, "messages": 2}).windows == ()


def test_merge_adds_counts_and_keeps_maxima_a_watermark_moving_back_is_ignored():
    p = PartitionProgress("t", 0, messages=3, max_offset=9, max_watermark_ts=ms_to_tso(T0 + 50), max_routing_ms=T0 + 60,
                          unroutable={"no_time_in_message": 1})
    p.merge(PartitionProgress("t", 0, messages=2, max_offset=4, max_watermark_ts=ms_to_tso(T0 + 10),
                              max_routing_ms=T0 + 90, unroutable={"no_time_in_message": 2, "implausible_time": 1}))
    assert (p.messages, p.max_offset, p.max_watermark_ts, p.max_routing_ms) == (5, 9, ms_to_tso(T0 + 50), T0 + 90)
    assert p.unroutable == {"no_time_in_message": 3, "implausible_time": 1}
    empty = PartitionProgress("t", 0)
    empty.merge(PartitionProgress("t", 0, messages=1, max_offset=0))
    assert (empty.max_offset, empty.max_watermark_ts, empty.unroutable) == (0, None, {})


def test_a_batch_moves_the_state_and_says_since_when_the_watermark_holds():
    state = LandingState()

    def batch(batch_id: str, wm_ms: int | None, offset: int, now: float) -> None:
        progress = PartitionProgress("cdc", 0, messages=1, max_offset=offset, max_routing_ms=T0 + offset,
                                     max_watermark_ts=None if wm_ms is None else ms_to_tso(wm_ms))
        state.apply_batch(batch_id, [f"digest-{batch_id}"], BatchStats(1, [progress], {T0: 1}), now=now)

    batch("a", None, 0, now=100.0)
    batch("b", T0 + HOUR, 1, now=200.0)
    batch("c", T0 + 5, 2, now=300.0)  # a watermark behind the last one: ignored, the last holds
    p = state.partitions["cdc/0"]
    assert (p.messages, p.max_offset, p.max_watermark_ts) == (3, 2, ms_to_tso(T0 + HOUR))
    assert (p.first_landed_at, p.watermark_since) == (100.0, 200.0)
    assert state.windows == {T0: 3} and state.landed_digests == {"digest-a", "digest-b", "digest-c"}
    assert [b.batch_id for b in state.batches] == ["a", "b", "c"] and state.batches[0].windows == (T0,)
    assert state.complete_windows(HOUR) == [T0]
    state.record_ignored_watermarks({"cdc/0": 1}, {})
    assert (p.regressed_watermarks, p.implausible_watermarks) == (1, None)
    assert state.to_json()["partitions"]["cdc/0"]["regressed_watermarks"] == 1


def test_completeness_modes_are_an_enum_and_text_is_checked_once():
    assert Completeness("event-time", 5_000).mode is CompletenessMode.EVENT_TIME
    assert Completeness().mode is CompletenessMode.WATERMARK
    with pytest.raises(ValueError, match=r"completeness mode 'eventtime' is not one of "
                                         r"\('watermark', 'event-time', 'batch'\)"):
        Completeness("eventtime")
