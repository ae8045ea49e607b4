"""Recovery after a writer was killed in the middle of `replace_dir`; row counts of written folders."""

import os

from cdc_assets.lib.storage import parquet_rows, remove_stale_temps, replace_dir, temp_sibling


def _version(path, text):
    path.mkdir(parents=True)
    (path / "part-0").write_text(text)
    return path


def test_replace_dir_swaps_in_the_new_version_and_leaves_nothing_beside_it(tmp_path):
    final = _version(tmp_path / "window=1", "old")
    replace_dir(_version(temp_sibling(final), "new"), final)
    assert (final / "part-0").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["window=1"]


def test_a_kill_between_the_two_renames_puts_the_last_complete_version_back(tmp_path):
    final = _version(tmp_path / "window=1", "old")
    unfinished = _version(temp_sibling(final), "new")
    os.replace(final, tmp_path / ".trash-window=1-deadbeef")  # replace_dir's first rename, then the kill

    remove_stale_temps(final)

    assert (final / "part-0").read_text() == "old"
    assert not unfinished.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["window=1"]


def test_a_kill_after_the_swap_leaves_only_garbage_to_remove(tmp_path):
    final = _version(tmp_path / "window=1", "new")
    _version(tmp_path / ".trash-window=1-deadbeef", "old")
    _version(tmp_path / ".trash-window=10-cafebabe", "another window's")  # not ours

    remove_stale_temps(final)

    assert (final / "part-0").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".trash-window=10-cafebabe", "window=1"]


def test_only_the_siblings_of_this_name_are_touched_even_with_glob_characters(tmp_path):
    final = _version(tmp_path / "t[1]", "current")
    ours = _version(temp_sibling(final), "unfinished")
    other = _version(tmp_path / ".tmp-t[1]-x-0123abcd", "the temp of `t[1]-x`")

    remove_stale_temps(final)

    assert not ours.exists() and other.exists() and (final / "part-0").read_text() == "current"


def test_parquet_rows_counts_what_spark_reads_from_a_written_folder(tmp_path, spark):
    """The footer count equals Spark's count: several part files and an empty one count,
    `_`- and `.`-named files and folders (Spark's `_SUCCESS`, `.crc`) do not."""
    import shutil

    import pyarrow.parquet as pq

    df = spark.range(0, 1234, 1, numPartitions=5).selectExpr("id", "cast(id as string) as s")
    t = tmp_path / "t"
    df.where("id % 7 != 0").write.parquet(str(t))
    df.limit(0).write.mode("append").parquet(str(t))
    parts = sorted(t.glob("part-*.parquet"))
    assert 0 in [pq.read_metadata(p).num_rows for p in parts] and len(parts) > 2  # an empty part file
    largest = max(parts, key=lambda p: pq.read_metadata(p).num_rows)
    shutil.copy(largest, t / ".hidden.parquet")
    shutil.copy(largest, t / "_ignored.parquet")
    df.write.parquet(str(t / "_skipped"))
    assert parquet_rows(t) == spark.read.parquet(str(t)).count() == 1234 - 177
    spark.range(0).write.parquet(str(tmp_path / "empty"))
    assert parquet_rows(tmp_path / "empty") == 0
