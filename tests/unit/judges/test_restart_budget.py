"""The restart budget (token bucket with back-off), the availability clock and step deadlines."""

from __future__ import annotations

import threading
import time

import pytest

from nemo_genrm.judges.deadline import current_deadline, deadline_within, remaining_s, step_deadline
from nemo_genrm.judges.restart_budget import Availability, RestartBudget


def _budget(**kw) -> RestartBudget:
    args = {"max_restarts": 2, "refill_s": 10.0, "backoff_s": 1.0, "backoff_max_s": 5.0, "now": 100.0}
    return RestartBudget(**{**args, **kw})


def test_budget_is_spent_then_refills_one_restart_per_period_up_to_its_size():
    budget = _budget()
    assert budget.take(100.0) and budget.take(100.0)
    assert not budget.take(100.0)  # spent
    assert budget.next_refill(100.0) == pytest.approx(110.0)
    assert not budget.take(109.9)
    assert budget.take(110.0)  # one came back
    assert not budget.take(110.0)
    assert budget.available(1000.0) == 2.0  # refills to its size, never past it


def test_a_budget_that_never_refills():
    budget = _budget(max_restarts=1, refill_s=0.0)
    assert budget.take(0.0) and not budget.take(1e9)
    assert budget.next_refill(1e9) is None


def test_backoff_doubles_per_crash_in_a_row_up_to_its_cap():
    budget = _budget()
    assert [budget.backoff(n) for n in range(0, 6)] == [0.0, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert _budget(backoff_s=0.0).backoff(3) == 0.0


def test_availability_counts_from_the_first_moment_with_no_replica():
    avail = Availability(grace_s=30.0)
    avail.update(1, 0.0)
    assert avail.down_for(50.0) == 0.0 and not avail.gone(50.0)
    avail.update(0, 10.0, "replica 0 crashed")
    avail.update(0, 20.0)  # still down: the clock keeps its start
    assert avail.down_for(25.0) == 15.0 and not avail.gone(40.0) and avail.gone(40.1)
    assert avail.why == "replica 0 crashed"
    avail.update(1, 41.0)  # back: the clock resets
    assert not avail.gone(100.0)


def test_step_deadline_is_the_earlier_one_and_is_per_thread():
    assert current_deadline() is None
    now = time.monotonic()
    assert deadline_within(5.0, start=now) == now + 5.0
    with step_deadline(now + 1.0):
        assert deadline_within(5.0, start=now) == now + 1.0  # the step's is earlier
        assert deadline_within(0.5, start=now) == now + 0.5  # the engine's own is earlier
        with step_deadline(now + 3.0):  # a later inner deadline does not extend the step
            assert current_deadline() == now + 1.0
        seen = []
        worker = threading.Thread(target=lambda: seen.append(current_deadline()))
        worker.start()
        worker.join()
        assert seen == [None]  # another thread's step is its own
        assert 0.0 < remaining_s(5.0) <= 1.0
    assert current_deadline() is None
    with step_deadline(now - 1.0):
        assert remaining_s(5.0) == 0.0  # never negative
