"""The known mistakes of `static_batch_generate` (notebook 14): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


BASE = """
    def static_batch_generate(step, requests, batch_size, eos_id):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        for r in requests:
            if len(r["prompt_ids"]) == 0 or r["max_tokens"] < 1:
                raise ValueError("every request needs prompt_ids and max_tokens >= 1")
        outputs = [None] * len(requests)
        admitted_at = [0] * len(requests)
        steps = slot_steps = 0
        for start in range(0, len(requests), batch_size):
            rows = list(range(start, min(start + batch_size, len(requests))))
            out = {}
            active = []
            for slot, i in enumerate(rows):
                admitted_at[i] = steps
                tok = step.prefill(slot, list(requests[i]["prompt_ids"]))
                out[i] = [tok]
                if tok != eos_id and len(out[i]) < requests[i]["max_tokens"]:
                    active.append(slot)
            while active:
                toks = step.decode(active, [out[rows[s]][-1] for s in active])
                steps += 1
                slot_steps += len(active)
                still = []
                for s, tok in zip(active, toks):
                    out[rows[s]].append(tok)
                    if tok != eos_id and len(out[rows[s]]) < requests[rows[s]]["max_tokens"]:
                        still.append(s)
                active = still
            for i in rows:
                outputs[i] = out[i]
        utilization = slot_steps / (steps * batch_size) if steps > 0 else 0.0
        return {"outputs": outputs, "steps": steps, "prefills": len(requests), "slot_steps": slot_steps,
                "utilization": utilization, "admitted_at": admitted_at}
"""

CHECK_PREFILL = 'if tok != eos_id and len(out[i]) < requests[i]["max_tokens"]:'

CHECK_DECODE = 'if tok != eos_id and len(out[rows[s]]) < requests[rows[s]]["max_tokens"]:'

UTILIZATION = "utilization = slot_steps / (steps * batch_size) if steps > 0 else 0.0"

MIXED = ["mixed_lengths_12_requests_batch_4", "long_tail_16_requests_batch_4"]

MISTAKES = {
    # finished rows still fed (a pad token's worth of work each, the way a GPU batch pads): the
    # contract keeps them idle, and the step refuses to decode a finished request
    "finished_rows_still_fed": Mistake(
        "keeps feeding rows whose request has finished instead of leaving them idle",
        edited(BASE, ("                active = still\n", "")),
        ["mixed_lengths_12_requests_batch_4", "eos_only_8_requests_batch_3"]),
    # eos ends the request but is not kept in its output
    "eos_not_in_the_output": Mistake(
        "ends a request at eos but leaves the eos token out of its output",
        edited(BASE, ("out[rows[s]].append(tok)", "out[rows[s]].append(tok) if tok != eos_id else None"),
                                         ("out[i] = [tok]", "out[i] = [tok] if tok != eos_id else []"),
                                         (CHECK_PREFILL, 'if tok != eos_id and len(out[i]) + 1 < requests[i]["max_tokens"]:')),
        ["eos_only_8_requests_batch_3", "finish_at_prefill_10_requests_batch_2"]),
    # one token short at max_tokens: the request stops after max_tokens - 1
    "last_token_at_max_tokens_lost": Mistake(
        "stops one token before max_tokens",
        edited(BASE, (CHECK_DECODE, 'if tok != eos_id and len(out[rows[s]]) < requests[rows[s]]["max_tokens"] - 1:')),
        ["max_tokens_only_9_requests_batch_3"]),
    # <= for <: one token past max_tokens (the step refuses to decode a request that has finished)
    "one_token_past_max_tokens": Mistake(
        "decodes one token past max_tokens (<= instead of <)",
        edited(BASE, (CHECK_DECODE, 'if tok != eos_id and len(out[rows[s]]) <= requests[rows[s]]["max_tokens"]:')),
        ["max_tokens_only_9_requests_batch_3"]),
    # a request finished by its prefill (eos first, or max_tokens 1) decoded anyway
    "prefill_token_not_checked": Mistake(
        "keeps decoding a request that finished at its prefill (eos first, or max_tokens of 1)",
        edited(BASE, (CHECK_PREFILL, "if True:")),
        ["finish_at_prefill_10_requests_batch_2", "every_request_one_token_6_requests_batch_4"]),
    # outputs appended as the requests finish
    "outputs_in_completion_order": Mistake(
        "returns the outputs in the order the requests finished instead of the requests' order",
        edited(BASE, ("outputs = [None] * len(requests)", "outputs = []"),
                                               ("                    out[rows[s]].append(tok)\n",
                                                "                    out[rows[s]].append(tok)\n"
                                                "                    if tok == eos_id or len(out[rows[s]]) == requests[rows[s]]['max_tokens']:\n"
                                                "                        outputs.append(out[rows[s]])\n"),
                                               ("            for i in rows:\n                outputs[i] = out[i]\n",
                                                "            outputs += [out[i] for i in rows if len(out[i]) == 1]\n")),
        MIXED),
    # the utilization over the slots busy in each step: 1.0 whatever the waste
    "utilization_over_busy_rows": Mistake(
        "divides the slot steps by themselves, so the utilization is always 1",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / slot_steps if steps > 0 else 0.0")),
        MIXED),
    # the utilization over the rows of each batch: a last, smaller batch counted full
    "utilization_over_the_rows_of_a_batch": Mistake(
        "counts a last, smaller batch as a full one for the utilization",
        edited(BASE, ("        steps = slot_steps = 0\n", "        steps = slot_steps = capacity = 0\n"),
                                                        ("                steps += 1\n", "                steps += 1\n                capacity += len(rows)\n"),
                                                        (UTILIZATION, "utilization = slot_steps / capacity if steps > 0 else 0.0")),
        ["partial_last_batch_10_requests_batch_4", "more_slots_than_requests_3_requests_batch_8"]),
    "utilization_divides_by_zero": Mistake(
        "computes the utilization without a guard, so a run with no decode step divides by zero",
        edited(BASE, (UTILIZATION, "utilization = slot_steps / (steps * batch_size)")),
        ["every_request_one_token_6_requests_batch_4", "no_requests_batch_4"]),
    # each batch's prefill counted as a step
    "prefill_round_counted_as_a_step": Mistake(
        "counts each batch's prefill as a decode step",
        edited(BASE, ("            active = []\n", "            active = []\n            steps += 1\n")),
        MIXED),
    # batches of requests of similar max_tokens: fewer wasted slots, but not the contract's batches
    "batches_sorted_by_max_tokens": Mistake(
        "forms batches of requests sorted by max_tokens instead of consecutive requests",
        edited(BASE, ("rows = list(range(start, min(start + batch_size, len(requests))))",
                                                       "rows = sorted(range(len(requests)), key=lambda k: requests[k]['max_tokens'])[start:start + batch_size]")),
        MIXED),
    # the batch number, not the decode-step index
    "admitted_at_is_the_batch_number": Mistake(
        "records the batch number as admitted_at instead of the decode-step index",
        edited(BASE, ("admitted_at[i] = steps", "admitted_at[i] = start // batch_size")),
        MIXED),
    # the request's own prompt list used as the running sequence: the caller's requests grow
    "prompt_list_used_as_the_sequence": Mistake(
        "appends the new tokens to the request's own prompt list, changing the caller's requests",
        edited(BASE, ("out[i] = [tok]", "out[i] = [tok]\n                requests[i]['prompt_ids'].append(tok)")),
        MIXED),
    "no_value_errors": Mistake(
        "accepts batch_size < 1, an empty prompt or max_tokens < 1 instead of raising ValueError",
        edited(BASE, ("""        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        for r in requests:
            if len(r["prompt_ids"]) == 0 or r["max_tokens"] < 1:
                raise ValueError("every request needs prompt_ids and max_tokens >= 1")
""", "")),
        ["error_batch_size_negative", "error_max_tokens_0"]),
}
