"""continuous_batch_generate (notebook 14): the reference's contract, correct versions that earn
full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md,
"Adding a graded function")."""

from __future__ import annotations

import pytest
from hypothesis import given

from autograder.mistakes.continuous_batch_generate import BASE
from course_lib import continuous_batch_generate
from course_lib.batching import SyntheticDecodeStep
from tests.helpers import (BATCH_EOS, PROPERTY_SETTINGS, batch_requests, checked_batcher_run, corpus_tests,
                           many_draws_test)

SUITE = "continuous_batch_generate"


class Recording(SyntheticDecodeStep):
    """The synthetic step, recording which slots each decode call fed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def decode(self, slots, tokens):
        self.calls.append(list(slots))
        return super().decode(slots, tokens)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(batch_requests())
def test_reference_gives_each_request_its_own_greedy_tokens_with_every_slot_busy(drawn):
    got, step = checked_batcher_run(continuous_batch_generate, drawn, Recording)
    batch_size = drawn[2]
    lengths = [len(o) - 1 for o in got["outputs"]]  # decode steps each request takes
    for k, slots in enumerate(step.calls):
        waiting = sum(a > k for a in got["admitted_at"])
        assert waiting == 0 or len(slots) == batch_size, "a slot idle while a request waits"
        busy = sum(a <= k < a + n for a, n in zip(got["admitted_at"], lengths))
        assert len(slots) == busy
    assert got["admitted_at"] == sorted(got["admitted_at"])  # request order


def test_reference_admits_as_soon_as_a_slot_frees():
    requests = [{"prompt_ids": [i], "max_tokens": m} for i, m in enumerate([5, 2, 1, 3, 1, 2])]
    step = SyntheticDecodeStep(requests, slots=2, eos_id=BATCH_EOS, eos_rates=[0.0] * 6)
    got = continuous_batch_generate(step, requests, 2, BATCH_EOS)
    # request 1 ends after 1 step; 2 finishes at its prefill, so 3 takes the slot at once
    assert got["admitted_at"] == [0, 0, 1, 1, 3, 3]
    assert [len(o) for o in got["outputs"]] == [5, 2, 1, 3, 1, 2]
    assert (got["steps"], got["slot_steps"]) == (4, 4 + 1 + 2 + 1)


def test_reference_errors():
    step = SyntheticDecodeStep([], slots=1, eos_id=BATCH_EOS, eos_rates=[])
    with pytest.raises(ValueError, match="batch_size"):
        continuous_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 3}], -1, BATCH_EOS)
    with pytest.raises(ValueError, match=r"requests\[0\] has no prompt_ids"):
        continuous_batch_generate(step, [{"prompt_ids": [], "max_tokens": 3}], 2, BATCH_EOS)
    with pytest.raises(ValueError, match="max_tokens"):
        continuous_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 0}], 2, BATCH_EOS)


CORRECT = {
    "deque_and_a_dict_of_slots_admitting_after_the_step": BASE,
    # a list of slots (None when free), an index pointer, a new request admitted inside the step
    # loop the moment a slot's request finishes
    "slot_list_index_pointer_admitting_inside_the_loop": """
        def continuous_batch_generate(step, requests, batch_size, eos_id):
            if batch_size < 1:
                raise ValueError("batch_size")
            for k, r in enumerate(requests):
                if not r["prompt_ids"]:
                    raise ValueError(f"requests[{k}]: no prompt")
                if r["max_tokens"] < 1:
                    raise ValueError(f"requests[{k}]: max_tokens")
            n = len(requests)
            out = [[] for _ in range(n)]
            admitted = [0] * n
            slot_req = [None] * batch_size
            nxt = 0
            steps = fed = 0
            def done(i):
                return out[i][-1] == eos_id or len(out[i]) == requests[i]["max_tokens"]
            def fill(s):
                nonlocal nxt
                while slot_req[s] is None and nxt < n:
                    i = nxt
                    nxt += 1
                    admitted[i] = steps
                    out[i].append(step.prefill(s, list(requests[i]["prompt_ids"])))
                    if not done(i):
                        slot_req[s] = i
            for s in range(batch_size):
                fill(s)
            while any(r is not None for r in slot_req):
                busy = [s for s in range(batch_size) if slot_req[s] is not None]
                toks = step.decode(busy, [out[slot_req[s]][-1] for s in busy])
                steps += 1
                fed += len(busy)
                for s, t in zip(busy, toks):
                    out[slot_req[s]].append(t)
                    if done(slot_req[s]):
                        slot_req[s] = None
                        fill(s)
            return {"outputs": out, "steps": steps, "prefills": n, "slot_steps": fed,
                    "utilization": fed / (steps * batch_size) if steps else 0.0, "admitted_at": admitted}
    """,
    # free slots in a heap, running requests as [slot, index, tokens] records in a list
    "heap_of_free_slots_list_of_records": """
        import heapq
        def continuous_batch_generate(step, requests, batch_size, eos_id):
            if batch_size <= 0:
                raise ValueError("batch_size must be positive")
            if any(len(r.get("prompt_ids", [])) == 0 for r in requests):
                raise ValueError("empty prompt_ids")
            if any(r["max_tokens"] <= 0 for r in requests):
                raise ValueError("max_tokens must be positive")
            free = list(range(batch_size))
            heapq.heapify(free)
            running = []
            results = {}
            admitted = {}
            queue = list(enumerate(requests))[::-1]
            t = 0
            used = 0
            while queue or running:
                while free and queue:
                    i, r = queue.pop()
                    s = heapq.heappop(free)
                    admitted[i] = t
                    toks = [step.prefill(s, list(r["prompt_ids"]))]
                    if toks[-1] == eos_id or r["max_tokens"] == 1:
                        results[i] = toks
                        heapq.heappush(free, s)
                    else:
                        running.append([s, i, toks])
                if not running:
                    continue
                new = step.decode([rec[0] for rec in running], [rec[2][-1] for rec in running])
                t += 1
                used += len(running)
                still = []
                for rec, tok in zip(running, new):
                    rec[2].append(tok)
                    if tok == eos_id or len(rec[2]) == requests[rec[1]]["max_tokens"]:
                        results[rec[1]] = rec[2]
                        heapq.heappush(free, rec[0])
                    else:
                        still.append(rec)
                running = still
            n = len(requests)
            return {"outputs": [results[i] for i in range(n)], "steps": t, "prefills": n, "slot_steps": used,
                    "utilization": used / (t * batch_size) if t else 0.0, "admitted_at": [admitted[i] for i in range(n)]}
    """,
    # an event loop over a set of busy slots; the accounting from the step count and the lengths
    "busy_set_and_remaining_budget": """
        def continuous_batch_generate(step, requests, batch_size, eos_id):
            if batch_size < 1:
                raise ValueError("batch_size < 1")
            for r in requests:
                if not r["prompt_ids"] or r["max_tokens"] < 1:
                    raise ValueError("bad request")
            pending = iter(range(len(requests)))
            left = {}
            last = {}
            who = {}
            outputs = {}
            when = {}
            steps = 0
            free = set(range(batch_size))
            exhausted = False
            while True:
                while free and not exhausted:
                    i = next(pending, None)
                    if i is None:
                        exhausted = True
                        break
                    s = min(free)
                    when[i] = steps
                    tok = step.prefill(s, requests[i]["prompt_ids"].copy())
                    outputs[i] = [tok]
                    if tok != eos_id and requests[i]["max_tokens"] > 1:
                        free.discard(s)
                        who[s], last[s], left[s] = i, tok, requests[i]["max_tokens"] - 1
                if not who:
                    break
                order = sorted(who)
                for s, tok in zip(order, step.decode(order, [last[s] for s in order])):
                    outputs[who[s]].append(tok)
                    last[s], left[s] = tok, left[s] - 1
                    if tok == eos_id or left[s] == 0:
                        del who[s], last[s], left[s]
                        free.add(s)
                steps += 1
            outs = [outputs[i] for i in range(len(requests))]
            fed = sum(len(o) - 1 for o in outs)
            return {"outputs": outs, "steps": steps, "prefills": len(outs), "slot_steps": fed,
                    "utilization": 0.0 if steps == 0 else fed / (steps * batch_size),
                    "admitted_at": [when[i] for i in range(len(requests))]}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
