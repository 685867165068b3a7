"""Hidden cases of `rollouts_from_completion(reply, eos_token_id) -> list[dict]` (notebook 14): the
samples of a `/v1/completions` reply as the trainer takes them. Outputs are exact: {"samples"}.
Error cases must raise ValueError (or a subclass): {"raises": "ValueError"}, "other" or None.

Replies are drawn: n of 1 to 8 samples listed in a shuffled order (a server answers in the order
samples finish), of 0 to 40 tokens, ending with the end-of-text token or not, finishing "stop",
"length" or "abort"; token ids and log-probs drawn (log-probs as a server writes them, Python
floats). What the cases are built to catch: samples in the listed order instead of by index, the
eos kept, the last token dropped when it is not the eos (or dropped with the wrong log-prob), an
eos in the middle of a sample dropped, finish reasons passed through raw, ids read from the
decoded text, an empty sample (eos only); and the errors: a reply without choices, a choice
without log-probs, tokens written as text, tokens and log-probs of different lengths, a repeated
index.
"""

from __future__ import annotations

import torch

GRADED = "rollouts_from_completion"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_no_choices": "a reply without a `choices` list",
    "error_no_logprobs": "a choice without log-probs",
    "error_tokens_as_text": "a token not written `token_id:N`",
    "error_lengths_differ": "tokens and log-probs of different lengths",
    "error_repeated_index": "two choices with one index",
}
EOS = 1


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def rint(lo, hi):
        return int(torch.randint(lo, hi, (), generator=gen))

    def sample(length, eos_end, reason, eos_inside=False):
        ids = [rint(2, 822) for _ in range(length)]
        if eos_inside and length > 2:
            ids[length // 2] = EOS
        if eos_end:
            ids.append(EOS)
        lps = [-float(torch.rand((), generator=gen, dtype=torch.float64)) * 8 for _ in ids]
        return {"logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": lps,
                             "text_offset": list(range(len(ids))), "top_logprobs": None}, "finish_reason": reason,
                "text": "(decoded text)", "stop_reason": None}

    def reply(samples, shuffle=True):
        order = torch.randperm(len(samples), generator=gen).tolist() if shuffle else list(range(len(samples)))
        return {"id": "cmpl-x", "object": "text_completion", "model": "policy",
                "choices": [{"index": j, **samples[j]} for j in order]}

    def case(r, eos=EOS, error=False):
        return {"reply": r, "eos_token_id": eos, "expect_error": error}

    # samples that end with the eos and samples that do not, on every draw (listed in another order by `reply`)
    ends = [True, False] + [bool(rint(0, 2)) for _ in range(6)]
    mixed = [sample(rint(3, 40), eos_end=end, reason="stop") for end in ends]
    lengths = [sample(rint(5, 30), eos_end=False, reason="length") for _ in range(3)] + \
              [sample(rint(5, 30), eos_end=True, reason="stop") for _ in range(3)]
    bad_text = sample(5, eos_end=True, reason="stop")
    bad_text["logprobs"]["tokens"] = [" five", " plus", " two", " is", "<|endoftext|>"]
    short = sample(6, eos_end=False, reason="stop")
    short["logprobs"]["token_logprobs"] = short["logprobs"]["token_logprobs"][:-1]
    no_lp = sample(4, eos_end=True, reason="stop")
    no_lp["logprobs"] = None
    twice = reply([sample(4, True, "stop"), sample(5, True, "stop")], shuffle=False)
    twice["choices"][1]["index"] = 0
    return [
        ("eight_samples_listed_out_of_order", case(reply(mixed))),
        ("one_sample_ending_with_eos", case(reply([sample(rint(5, 30), True, "stop")]))),
        ("stopped_by_a_stop_string_no_eos", case(reply([sample(rint(5, 30), False, "stop") for _ in range(3)]))),
        ("cut_at_max_tokens", case(reply(lengths))),
        ("eos_inside_a_sample_is_kept", case(reply([sample(12, True, "stop", eos_inside=True),
                                                    sample(9, False, "length", eos_inside=True)]))),
        ("empty_samples", case(reply([sample(0, True, "stop"), sample(0, False, "length"), sample(3, True, "stop")]))),
        ("aborted_sample_is_a_stop", case(reply([sample(7, False, "abort"), sample(6, True, "stop")]))),
        ("another_eos_id", case(reply([sample(10, True, "stop"), sample(8, False, "stop")]), eos=EOS + 6)),
        ("no_samples", case(reply([]))),
        ("error_no_choices", case({"id": "cmpl-x", "object": "error", "message": "bad request"}, error=True)),
        ("error_no_logprobs", case(reply([sample(4, True, "stop"), no_lp]), error=True)),
        ("error_tokens_as_text", case(reply([bad_text]), error=True)),
        ("error_lengths_differ", case(reply([short]), error=True)),
        ("error_repeated_index", case(twice, error=True)),
    ]


def call(fn, inputs: dict) -> dict:
    import copy

    reply = copy.deepcopy(inputs["reply"])
    if inputs["expect_error"]:
        try:
            fn(reply, inputs["eos_token_id"])
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    return {"samples": fn(reply, inputs["eos_token_id"])}
