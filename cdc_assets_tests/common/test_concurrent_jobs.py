import threading
import time

import pytest

from cdc_assets.common.concurrent_jobs import run_concurrently


def test_results_come_back_in_the_order_given():
    def task(i):
        time.sleep(0.02 * (5 - i))  # the first task finishes last
        return i * 10

    assert run_concurrently([lambda i=i: task(i) for i in range(5)]) == [0, 10, 20, 30, 40]


def test_tasks_overlap_on_several_threads():
    barrier = threading.Barrier(3, timeout=5)  # passes only if three tasks run at once

    def task():
        barrier.wait()
        return threading.current_thread().name

    names = run_concurrently([task] * 3)
    assert len(set(names)) == 3 and all(n.startswith("cdc-spark") for n in names)


def test_every_task_finishes_before_the_first_failure_is_raised():
    finished = []

    def fails():
        raise ValueError("table a failed")

    def slow():
        time.sleep(0.2)
        finished.append("b")

    with pytest.raises(ValueError, match="table a failed"):
        run_concurrently([fails, slow, slow])
    assert finished == ["b", "b"]


def test_one_task_runs_on_the_calling_thread():
    assert run_concurrently([lambda: threading.current_thread().name]) == [threading.current_thread().name]


def test_the_other_failures_come_as_notes_of_the_first():
    def fails(message):
        raise RuntimeError(message)

    with pytest.raises(RuntimeError, match="first") as raised:
        run_concurrently([lambda: fails("first"), lambda: fails("second")])
    assert any("second" in note for note in raised.value.__notes__)
