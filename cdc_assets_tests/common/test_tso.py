"""TSO arithmetic: a commit time in ms shifted into a commit_ts."""

import pytest

from cdc_assets.common.tso import MAX_TSO_MS, ms_to_commit_ts, tso_to_ms


@pytest.mark.parametrize("ms, expected", [
    (1_700_000_000_000, 1_700_000_000_000 << 18),
    (1, 1 << 18),
    (MAX_TSO_MS - 1, (MAX_TSO_MS - 1) << 18),
    (MAX_TSO_MS, None),  # would not be a positive long
    (0, None),
    (-1, None),
    (None, None),
])
def test_ms_to_commit_ts(ms, expected):
    assert ms_to_commit_ts(ms) == expected
    if expected is not None:
        assert 0 < expected < 1 << 63 and tso_to_ms(expected) == ms
