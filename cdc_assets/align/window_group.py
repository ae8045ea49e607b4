"""Decode and align a group of consecutive windows in one pass (issue 45: a range of windows
is one pass over their data).

The group's messages are decoded by one Python pass (the decoder's output cached for the
type pre-pass, `decode.window_decode.decode_windows`), then every window's events are
marked late, duplicate or outside in one plan, each against its own window
(`change_table.mark_windows`), and that is cached by one job. Each window's change table
and quarantine are then a filter of the cache, written with their counts and contracts
observed by the write (about one job each): the per-window work is the write, not the
decode, the type pre-pass and the alignment's exchanges again.

Windows are grouped in order up to `MAX_GROUP_MESSAGES` messages (a larger window is a group
of its own), so that a backfill of many windows does not cache them all at once. Messages, not
events, because the pinned reads count them before anything is decoded: a protocol that
batches events (Open Protocol) caches more per message."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping

from pyspark.sql import DataFrame

from cdc_assets.align.change_table import FLAGS, mark_windows
from cdc_assets.decode.base import Decoder
from cdc_assets.decode.common.raw_bytes import MESSAGE_KEY
from cdc_assets.decode.window_decode import WINDOW, DecodedWindow, decode_windows

MAX_GROUP_MESSAGES = 1_000_000


def groups(windows: Iterator, size, limit: int = MAX_GROUP_MESSAGES) -> Iterator[list]:
    """`windows` in runs of consecutive items whose `size` adds up to at most `limit` (one
    larger item is a run of its own). Lazy: an item is taken only when its run needs it."""
    run, total = [], 0
    for item in windows:
        n = size(item)
        if run and total + n > limit:
            yield run
            run, total = [], 0
        run.append(item)
        total += n
    if run:
        yield run


@contextlib.contextmanager
def aligned_windows(decoder: Decoder, raw_messages: Mapping[int, DataFrame], watermarks: DataFrame,
                    window_ms: int) -> Iterator[Mapping[int, DecodedWindow]]:
    """Each window of the group (raw messages by window start), decoded and marked: a
    `DecodedWindow` whose `flagged` events carry `change_table.FLAGS`. The group's shared
    work (decode, type pre-pass, alignment) runs before this yields, so that its failure is
    no window's in particular (the caller can then take the windows one by one)."""
    with decode_windows(decoder, raw_messages, window_ms) as group:
        offsets = functools.reduce(DataFrame.unionByName, [raw.select(*MESSAGE_KEY) for raw in raw_messages.values()])
        marked = mark_windows(group.rows, watermarks, WINDOW, window_ms, offsets, min(raw_messages)).persist()
        try:
            marked.count()  # fills the cache: the decode's conversion and the alignment, once for the group
            group.release_decoded()  # read by the job above only
            yield _Windows(lambda start: group.window(start, marked, FLAGS), raw_messages)
        finally:
            marked.unpersist()


class _Windows(Mapping):
    """The group's `DecodedWindow`s by window start, each built when first looked up (each
    registers its observations with the session: a window the run never reaches gets none)."""

    def __init__(self, build, starts):
        self._build, self._starts, self._built = build, list(starts), {}

    def __getitem__(self, start: int) -> DecodedWindow:
        if start not in self._starts:
            raise KeyError(start)
        if start not in self._built:
            self._built[start] = self._build(start)
        return self._built[start]

    def __iter__(self):
        return iter(self._starts)

    def __len__(self) -> int:
        return len(self._starts)
