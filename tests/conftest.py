"""Fixtures the test modules share (plain helper functions live in `tests/helpers.py`).

Hidden cases are made by the tests that use them, suite by suite (`autograder.cases.ensure_cases`:
regenerated only when missing or stale, under a file lock, so parallel workers never race)."""

from __future__ import annotations

import os
import signal

import pytest
import torch

# One torch thread per test process: `make test` runs two workers on two cores, and a worker with a
# thread per core oversubscribes them (a many-draws test took 41 s against 16 s with one thread,
# beside two busy processes). Subprocesses the tests start get OMP_NUM_THREADS=1 themselves.
torch.set_num_threads(1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under `--dist loadgroup` (make test), the group of each test marked `xdist_group` as a suffix
    of its node id ("...@group"), which is how xdist's scheduler keeps a group on one worker.
    xdist 3.8 writes that suffix to `item._nodeid`, which pytest 9 no longer reads (it keeps the id
    in `item._id`): every group was split over both workers, each making the group's judge run,
    catalogue grading or zip again. Written here where this pytest reads it; nothing to do where
    xdist's own suffix took."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)


@pytest.fixture(scope="session")
def tok():
    """The course tokenizer (data/tokenizer)."""
    from tests.helpers import course_tokenizer

    return course_tokenizer()


@pytest.fixture(autouse=True)
def no_server_outlives_its_test():
    """Every vLLM server a test started is gone, its whole process group, when the test ends, whatever
    way it ended: what is left is killed (so the next test starts clean) and the test fails."""
    from course_lib.rollouts.vllm_server import STARTED_GROUPS, group_members

    first = len(STARTED_GROUPS)
    yield
    left = {pgid: group_members(pgid) for pgid in STARTED_GROUPS[first:] if group_members(pgid)}
    for pgid in left:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"processes of a vLLM server outlived their test (group: pids): {left}"
