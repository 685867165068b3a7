"""The grader's side of `continuous_batch_generate` (notebook 14): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `continuous_batch_generate(step, requests, batch_size, eos_id) -> dict` (notebook
14): greedy decoding of requests {"prompt_ids", "max_tokens"} in batch_size slots, every free
slot taking the next waiting request (in request order) before the first decode step and after
each one, a request leaving its slot in the step in which it finishes (eos_id, kept, or
max_tokens tokens); the accounting of `course_lib.batching`.

The decode step (`course_lib.batching.SyntheticDecodeStep`, which raises on misuse), the outputs
and the cases are those of `static_batch_generate`'s suite (`autograder/graded/_batching_cases/`).

What the cases are built to catch:

- `mixed_lengths_*`, `long_tail_*`: no admission until the batch drains (static batching:
  more steps, lower utilization, later admitted_at), requests admitted last-in first-out;
- every case: outputs in completion order, eos dropped (`eos_only_*`), the last token at
  max_tokens lost or one too many (`max_tokens_only_*`), a finished request still fed or
  prefilled over (the step raises), admitted_at counted after the step;
- `simultaneous_finishes_*`: one admission per step when several slots free at once;
- `finish_at_prefill_*` (eos first, max_tokens 1): such a request decoded anyway, or its slot
  left empty for a step instead of taking the next request at once;
- a freed slot given the new request by decode instead of prefill (the step raises), or the
  slot's token buffer not reset (the previous request's tokens in the new output);
- `more_slots_than_requests_*`: utilization over min(batch_size, requests) slots;
- `every_request_one_token_*`, `no_requests_*`: no decode step at all (utilization 0.0);
- the `error_*` cases: batch_size < 1, a request without prompt ids, max_tokens < 1.
"""

from __future__ import annotations

import torch

from autograder.graded._batching_cases import batching_cases
from autograder.mistakes import edited, Mistake
# its error cases and their Raises: phrases are these too
from autograder.graded.static_batch_generate.grader import RAISES  # noqa: F401


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    return batching_cases(gen)


# ---------------------------------------------------------------- the correct versions
BASE = """
    from collections import deque
    def continuous_batch_generate(step, requests, batch_size, eos_id):
        bad = [k for k, r in enumerate(requests) if not r["prompt_ids"] or r["max_tokens"] < 1]
        if batch_size < 1 or bad:
            raise ValueError(f"batch_size {batch_size}; requests without prompt ids or max_tokens >= 1: {bad}")
        waiting = deque(range(len(requests)))
        outputs = [[] for _ in requests]
        admitted_at = [0] * len(requests)
        slots = {}
        free = list(range(batch_size))
        steps = slot_steps = 0
        while True:
            while free and waiting:
                slot = free.pop()
                i = waiting.popleft()
                admitted_at[i] = steps
                tok = step.prefill(slot, list(requests[i]["prompt_ids"]))
                outputs[i].append(tok)
                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:
                    free.append(slot)
                else:
                    slots[slot] = i
            if not slots:
                break
            busy = list(slots)
            toks = step.decode(busy, [outputs[slots[s]][-1] for s in busy])
            steps += 1
            slot_steps += len(busy)
            for s, tok in zip(busy, toks):
                i = slots[s]
                outputs[i].append(tok)
                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:
                    del slots[s]
                    free.append(s)
        utilization = slot_steps / (steps * batch_size) if steps else 0.0
        return {"outputs": outputs, "steps": steps, "prefills": len(requests), "slot_steps": slot_steps,
                "utilization": utilization, "admitted_at": admitted_at}
"""

ADMIT = "            while free and waiting:\n"

FINISHED_AT_PREFILL = 'if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:\n                    free.append(slot)'

FINISHED = '                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:\n                    del slots[s]'

UTILIZATION = "utilization = slot_steps / (steps * batch_size) if steps else 0.0"

MIXED = ["mixed_lengths_12_requests_batch_4", "long_tail_16_requests_batch_4"]


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


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # static batching: the free slots refilled only once every slot is free
    "admits_only_when_the_batch_drains": Mistake(
        "refills free slots only once every slot is free: static batching, not continuous",
        edited(BASE, (ADMIT, "            while free and waiting and not slots:\n")),
        MIXED),
    # one new request per decode step, however many slots freed
    "one_admission_per_step": Mistake(
        "admits one waiting request per decode step however many slots are free",
        edited(BASE, (ADMIT, "            admitted_now = 0\n"
                                                        "            while free and waiting and (steps == 0 or admitted_now < 1):\n"
                                                        "                admitted_now += 1\n")),
        ["simultaneous_finishes_9_requests_batch_3"]),
    # the newest request first (a stack), not request order
    "last_in_first_out": Mistake(
        "admits the newest waiting request first (a stack) instead of in request order",
        edited(BASE, ("i = waiting.popleft()", "i = waiting.pop()")),
        MIXED),
    "eos_not_in_the_output": Mistake(
        "leaves the eos token out of a request's output",
        edited(BASE, ("                outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    del",
                                                "                if tok != eos_id:\n                    outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    del")),
        ["eos_only_8_requests_batch_3", "mixed_lengths_12_requests_batch_4"]),
    "last_token_at_max_tokens_lost": Mistake(
        "stops one token before max_tokens",
        edited(BASE, (FINISHED, '                if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"] - 1:\n                    del slots[s]')),
        ["max_tokens_only_9_requests_batch_3"]),
    # > for >=: one token past max_tokens (the step refuses to decode a request that has finished)
    "one_token_past_max_tokens": Mistake(
        "decodes one token past max_tokens (> instead of >=)",
        edited(BASE, (FINISHED, '                if tok == eos_id or len(outputs[i]) > requests[i]["max_tokens"]:\n                    del slots[s]')),
        ["max_tokens_only_9_requests_batch_3"]),
    # a request that finishes at its prefill still takes its slot: decoded anyway
    "finished_at_prefill_still_decoded": Mistake(
        "keeps decoding a request that finished at its prefill (eos or max_tokens of 1)",
        edited(BASE, (FINISHED_AT_PREFILL, "if False:\n                    free.append(slot)")),
        ["finish_at_prefill_10_requests_batch_2"]),
    # ... or its slot left empty until the next decode step
    "slot_freed_at_prefill_left_empty_a_step": Mistake(
        "leaves a slot freed at a prefill empty until the next decode step instead of refilling it at once",
        edited(BASE, ("        free = list(range(batch_size))\n",
                                                                  "        free = list(range(batch_size))\n        later = []\n"),
                                                           (FINISHED_AT_PREFILL, 'if tok == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]:\n                    later.append(slot)'),
                                                           ("            if not slots:\n",
                                                            "            free += later\n            later = []\n            if not slots and not (free and waiting):\n                break\n            if not slots:\n                continue\n")),
        ["finish_at_prefill_10_requests_batch_2"]),
    # a freed slot given its new request by feeding the prompt to decode, as if the cache were
    # the new request's (the step refuses: that slot's request has finished)
    "new_request_decoded_into_the_old_cache": Mistake(
        "feeds a new request's prompt to decode in a freed slot instead of prefilling it",
        edited(BASE, ("                tok = step.prefill(slot, list(requests[i][\"prompt_ids\"]))\n",
                                                                 "                if steps == 0:\n"
                                                                 "                    tok = step.prefill(slot, list(requests[i][\"prompt_ids\"]))\n"
                                                                 "                else:\n"
                                                                 "                    tok = step.decode([slot], [requests[i][\"prompt_ids\"][-1]])[0]\n")),
        MIXED),
    # the slot's token buffer kept from the request before: the new output starts with the old one
    "slot_buffer_not_reset": Mistake(
        "keeps a slot's token buffer from its previous request, so the new output starts with the old one",
        edited(BASE, ("        slots = {}\n", "        slots = {}\n        buffers = {}\n"),
                                         ("                outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    free",
                                          "                outputs[i] = buffers.setdefault(slot, [])\n                outputs[i].append(tok)\n                if tok == eos_id or len(outputs[i]) >= requests[i][\"max_tokens\"]:\n                    free")),
        MIXED),
    "outputs_in_completion_order": Mistake(
        "returns the outputs in the order the requests finished instead of the requests' order",
        edited(BASE, ("        return {\"outputs\": outputs,", "        done = sorted(range(len(requests)), key=lambda k: admitted_at[k] + len(outputs[k]))\n"
                                                                                            "        return {\"outputs\": [outputs[k] for k in done],")),
        MIXED),
    # admitted_at one step early: the index of the decode step before the admission
    "admitted_at_one_step_early": Mistake(
        "records admitted_at one decode step early",
        edited(BASE, ("admitted_at[i] = steps", "admitted_at[i] = max(steps - 1, 0)")),
        MIXED),
    "utilization_over_busy_rows": Mistake(
        "divides the slot steps by themselves, so the utilization is always 1",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / slot_steps if steps else 0.0")),
        MIXED),
    # the slots a request could fill: fewer requests than slots counted as a smaller batch
    "utilization_over_min_of_slots_and_requests": Mistake(
        "divides by min(batch_size, number of requests) instead of batch_size for the utilization",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / (steps * min(batch_size, len(requests))) if steps else 0.0")),
        ["more_slots_than_requests_3_requests_batch_8"]),
    "utilization_divides_by_zero": Mistake(
        "computes the utilization without a guard, so a run with no decode step divides by zero",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / (steps * batch_size)")),
        ["every_request_one_token_6_requests_batch_4", "no_requests_batch_4"]),
    "no_value_errors": Mistake(
        "accepts an empty prompt or max_tokens below 1 instead of raising ValueError",
        edited(BASE, ("""        bad = [k for k, r in enumerate(requests) if not r["prompt_ids"] or r["max_tokens"] < 1]
        if batch_size < 1 or bad:
            raise ValueError(f"batch_size {batch_size}; requests without prompt ids or max_tokens >= 1: {bad}")
""", "")),
        ["error_empty_prompt_ids", "error_max_tokens_0"]),
}
