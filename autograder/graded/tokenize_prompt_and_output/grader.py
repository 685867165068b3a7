"""The grader's side of `tokenize_prompt_and_output` (notebook 01): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `tokenize_prompt_and_output` (notebook 01).

Beyond the visible checks: other batch sizes and orders of lengths, a pad token that is not id 0
(a hard-coded 0 fails), prompts that end mid-word or with a space (joint tokenization merges
tokens across the boundary and fails), an empty output, a batch without padding, tokenizers
that add a BOS token (as Llama's and Gemma's do) or a BOS and an EOS token by default (so
`add_special_tokens=True`, the default, fails), prompts and outputs of different lengths and a
tokenizer without a pad token (both must raise ValueError).
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "more_prompts_than_outputs": "prompt_strs and output_strs of different lengths",
    "tokenizer_without_pad_token": "a tokenizer without a pad token",
}


def _pick(gen, items, k):
    idx = torch.randperm(len(items), generator=gen)[:k].tolist()
    return [items[i] for i in idx]


def _number(gen, low=0, high=10_000):
    return int(torch.randint(low, high, (1,), generator=gen))


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    rows = [gsm8k_to_r1_zero(r) for r in _pick(gen, load_problems("arith", "test"), 6)]
    rows.sort(key=lambda r: len(r["prompt"]) + len(r["output"]))
    case = lambda rs, pad=None, special=None: {"prompts": [r["prompt"] for r in rs], "outputs": [r["output"] for r in rs],
                                               "pad_token": pad, "special": special}
    a, b = _number(gen), _number(gen)
    return [
        # the shortest and the longest of the six: rows of one length would need no padding to hide a mistake in
        ("r1_zero_batch_of_three", case([rows[0], rows[5], rows[1]])),
        ("single_example", case(rows[3:4])),
        ("longest_first", case(rows[::-1][:4])),
        ("pad_token_is_not_id_0", case([rows[0], rows[5]], "<|endoftext|>")),
        ("pad_token_is_im_end", case([rows[1], rows[4], rows[2]], "<|im_end|>")),
        ("prompt_ends_mid_word", {"prompts": ["Kofi has boo", f"Compute {a} + {b} = "],
                                  "outputs": ["ks and pens", f"{a + b}"], "pad_token": None}),
        ("prompt_ends_with_space", {"prompts": ["Assistant: ", "User: hi "],
                                    "outputs": ["Hello there", "books and pens"], "pad_token": None}),
        ("empty_output", {"prompts": ["Question: what is 2 + 2?", "Q: 7 * 8"], "outputs": ["", " 56"], "pad_token": None}),
        ("no_padding_needed", {"prompts": [f"{a} +", f"{b} -"], "outputs": [f" {b}", f" {a}"], "pad_token": None}),
        ("tokenizer_adds_bos", case(rows[:3], special="bos")),
        ("tokenizer_adds_bos_and_eos", case([rows[4], rows[1]], "<|im_end|>", special="bos_eos")),
        ("more_prompts_than_outputs", {"prompts": [rows[0]["prompt"], rows[1]["prompt"]], "outputs": [rows[0]["output"]],
                                       "pad_token": None}),
        ("tokenizer_without_pad_token", case(rows[:2], "none")),
    ]


# ---------------------------------------------------------------- the correct versions
TOKENIZE_BASE = """
    import torch
    def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
        if len(prompt_strs) != len(output_strs):
            raise ValueError("lengths differ")
        if tokenizer.pad_token_id is None:
            raise ValueError("no pad token")
        P = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompt_strs]
        O = [tokenizer(o, add_special_tokens=False)["input_ids"] for o in output_strs]
        L = max(len(p) + len(o) for p, o in zip(P, O))
        full = torch.full((len(P), L), tokenizer.pad_token_id, dtype=torch.long)
        is_out = torch.zeros((len(P), L), dtype=torch.bool)
        for i, (p, o) in enumerate(zip(P, O)):
            full[i, :len(p) + len(o)] = torch.tensor(p + o, dtype=torch.long)
            is_out[i, len(p):len(p) + len(o)] = True
        return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": is_out[:, 1:]}
"""


CORRECT = {
    # per-example tokenization, a pre-filled pad tensor, the mask written row by row
    "per_example_loop": TOKENIZE_BASE,
    # batched tokenization, pad_sequence for the ids and the mask
    "batched_pad_sequence": """
        import torch
        from torch.nn.utils.rnn import pad_sequence
        def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
            if len(prompt_strs) != len(output_strs) or tokenizer.pad_token_id is None:
                raise ValueError("bad batch")
            enc = lambda texts: tokenizer(list(texts), add_special_tokens=False)["input_ids"]
            rows, masks = [], []
            for p, o in zip(enc(prompt_strs), enc(output_strs)):
                rows.append(torch.tensor(p + o, dtype=torch.long))
                masks.append(torch.tensor([False] * len(p) + [True] * len(o)))
            full = pad_sequence(rows, batch_first=True, padding_value=tokenizer.pad_token_id)
            mask = pad_sequence(masks, batch_first=True, padding_value=False)
            return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": mask[:, 1:]}
    """,
    # Python lists padded by hand; the mask from the lengths by comparison with positions
    "lists_and_position_mask": """
        import torch
        def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
            if len(prompt_strs) != len(output_strs):
                raise ValueError(f"{len(prompt_strs)} prompts, {len(output_strs)} outputs")
            pad = tokenizer.pad_token_id
            if pad is None:
                raise ValueError("set a pad token first")
            prompts = [tokenizer.encode(p, add_special_tokens=False) for p in prompt_strs]
            outputs = [tokenizer.encode(o, add_special_tokens=False) for o in output_strs]
            seqs = [p + o for p, o in zip(prompts, outputs)]
            L = max(map(len, seqs))
            full = torch.tensor([s + [pad] * (L - len(s)) for s in seqs], dtype=torch.long)
            P = torch.tensor([len(p) for p in prompts])[:, None]
            O = torch.tensor([len(o) for o in outputs])[:, None]
            j = torch.arange(L - 1)[None, :]  # label positions: label j is token j + 1
            mask = (j >= P - 1) & (j < P + O - 1)
            return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": mask}
    """,
    # each row concatenated from its pieces, then stacked
    "cat_and_stack": """
        import torch
        def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
            if len(prompt_strs) != len(output_strs):
                raise ValueError("prompts and outputs differ in number")
            if tokenizer.pad_token_id is None:
                raise ValueError("the tokenizer has no pad token")
            p_ids = tokenizer(prompt_strs, add_special_tokens=False).input_ids
            o_ids = tokenizer(output_strs, add_special_tokens=False).input_ids
            L = max(len(p) + len(o) for p, o in zip(p_ids, o_ids))
            rows, masks = [], []
            for p, o in zip(p_ids, o_ids):
                n_pad = L - len(p) - len(o)
                rows.append(torch.cat([torch.tensor(p, dtype=torch.long), torch.tensor(o, dtype=torch.long),
                                       torch.full((n_pad,), tokenizer.pad_token_id, dtype=torch.long)]))
                masks.append(torch.cat([torch.zeros(len(p), dtype=torch.bool), torch.ones(len(o), dtype=torch.bool),
                                        torch.zeros(n_pad, dtype=torch.bool)]))
            full, mask = torch.stack(rows), torch.stack(masks)
            return {"input_ids": full[:, :-1].clone(), "labels": full[:, 1:].clone(), "response_mask": mask[:, 1:].clone()}
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 12


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # the default adds the tokenizer's BOS (and EOS) to every text: the strings already hold the format
    "special_tokens_added": Mistake(
        "lets the tokenizer add its special tokens (BOS, EOS) to every text",
        edited(TOKENIZE_BASE, ("tokenizer(p, add_special_tokens=False)", "tokenizer(p)"),
                                        ("tokenizer(o, add_special_tokens=False)", "tokenizer(o)")),
        ["tokenizer_adds_bos", "tokenizer_adds_bos_and_eos"]),
    # tokens merge across the boundary of prompt and output when the two are tokenized together
    "prompt_and_output_tokenized_together": Mistake(
        "tokenizes prompt and output together, so tokens can merge across their boundary",
        edited(TOKENIZE_BASE, (
            'O = [tokenizer(o, add_special_tokens=False)["input_ids"] for o in output_strs]',
            'O = [tokenizer(p + o, add_special_tokens=False)["input_ids"][len(q):] for p, o, q in zip(prompt_strs, output_strs, P)]')),
        ["prompt_ends_mid_word"]),
    # padded with id 0, whatever the tokenizer's pad token is
    "padded_with_0": Mistake(
        "pads with id 0 instead of the tokenizer's pad_token_id",
        edited(TOKENIZE_BASE, ("tokenizer.pad_token_id, dtype", "0, dtype")),
        ["pad_token_is_not_id_0"]),
    # the mask of the tokens, not of the labels: one position off
    "mask_not_shifted": Mistake(
        "takes the response mask of input_ids instead of the labels: one position off",
        edited(TOKENIZE_BASE, ('"response_mask": is_out[:, 1:]', '"response_mask": is_out[:, :-1]')),
        ["r1_zero_batch_of_three"]),
    # the labels are the input ids: no next-token shift
    "labels_not_shifted": Mistake(
        "returns labels equal to the input ids, without the next-token shift",
        edited(TOKENIZE_BASE, ('"labels": full[:, 1:]', '"labels": full[:, :-1]')),
        ["r1_zero_batch_of_three"]),
    # the mask runs on to the end of the row, over the padding
    "mask_covers_padding": Mistake(
        "runs the response mask on over the padding",
        edited(TOKENIZE_BASE, ("is_out[i, len(p):len(p) + len(o)] = True",
                                                       "is_out[i, len(p):] = True")),
        ["r1_zero_batch_of_three"]),
    # a mask of 0s and 1s, not booleans
    "mask_as_long": Mistake(
        "returns a mask of 0s and 1s instead of booleans",
        edited(TOKENIZE_BASE, ('"response_mask": is_out[:, 1:]', '"response_mask": is_out[:, 1:].long()')),
        ["single_example"]),
    # the padding on the left of each row, not on the right
    "left_padding": Mistake(
        "pads on the left of each row instead of the right",
        edited(TOKENIZE_BASE, (
            "full[i, :len(p) + len(o)] = torch.tensor(p + o, dtype=torch.long)\n            is_out[i, len(p):len(p) + len(o)] = True",
            "full[i, L - len(p) - len(o):] = torch.tensor(p + o, dtype=torch.long)\n            is_out[i, L - len(o):] = True")),
        ["r1_zero_batch_of_three"]),
    # bad input is not a ValueError: the lengths and the pad token never checked
    "no_value_errors": Mistake(
        "accepts lists of different lengths or a tokenizer without a pad token instead of raising ValueError",
        edited(TOKENIZE_BASE, ("""        if len(prompt_strs) != len(output_strs):
            raise ValueError("lengths differ")
        if tokenizer.pad_token_id is None:
            raise ValueError("no pad token")
""", "")),
        ["more_prompts_than_outputs", "tokenizer_without_pad_token"]),
    # int32 ids, not the contract's long
    "ids_as_int32": Mistake(
        "returns int32 ids instead of long",
        edited(TOKENIZE_BASE, ("tokenizer.pad_token_id, dtype=torch.long",
                                                "tokenizer.pad_token_id, dtype=torch.int32")),
        ["single_example"]),
    # an EOS after each output (a habit from pretraining data): the strings already end as they should
    "eos_appended_to_the_output": Mistake(
        "appends an EOS token to each output",
        edited(TOKENIZE_BASE, (
            'O = [tokenizer(o, add_special_tokens=False)["input_ids"] for o in output_strs]',
            'O = [tokenizer(o, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for o in output_strs]')),
        ["single_example"]),
    # notebook 01's visible check: "the mask covers the prompt"
    "prompt_in_the_mask": Mistake(
        "puts the prompt's tokens in the response mask too, where only the output's belong",
        edited(TOKENIZE_BASE, ("is_out[i, len(p):len(p) + len(o)] = True", "is_out[i, :len(p) + len(o)] = True")),
        ["single_example", "r1_zero_batch_of_three"]),
}
