"""Hidden cases of `tokenize_prompt_and_output` (notebook 01).

Beyond the visible checks: other batch sizes and orders of lengths, a pad token that is not id 0
(a hard-coded 0 fails), prompts that end mid-word or with a space (joint tokenization merges
tokens across the boundary and fails), an empty output, a batch without padding.
"""

import torch

GRADED = "tokenize_prompt_and_output"
KEYS = ("input_ids", "labels", "response_mask")


def _tokenizer(pad_token):
    from transformers import AutoTokenizer

    from course_lib.paths import DATA_DIR

    tok = AutoTokenizer.from_pretrained(str(DATA_DIR / "tokenizer"))
    if pad_token is not None:
        tok.pad_token = pad_token
    return tok


def _pick(gen, items, k):
    idx = torch.randperm(len(items), generator=gen)[:k].tolist()
    return [items[i] for i in idx]


def _number(gen, low=0, high=10_000):
    return int(torch.randint(low, high, (1,), generator=gen))


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    rows = [gsm8k_to_r1_zero(r) for r in _pick(gen, load_problems("arith", "test"), 6)]
    rows.sort(key=lambda r: len(r["prompt"]) + len(r["output"]))
    case = lambda rs, pad=None: {"prompts": [r["prompt"] for r in rs], "outputs": [r["output"] for r in rs], "pad_token": pad}
    a, b = _number(gen), _number(gen)
    return [
        ("r1_zero_batch_of_three", case(rows[:3])),
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
    ]


def call(fn, inputs: dict) -> dict:
    tokenizer = _tokenizer(inputs["pad_token"])
    out = fn(list(inputs["prompts"]), list(inputs["outputs"]), tokenizer)
    if not isinstance(out, dict):
        return {"returned a dict": False}
    return {k: out[k] for k in KEYS if k in out}
