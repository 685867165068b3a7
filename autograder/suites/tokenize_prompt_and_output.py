"""Hidden cases of `tokenize_prompt_and_output` (notebook 01).

Beyond the visible checks: other batch sizes and orders of lengths, a pad token that is not id 0
(a hard-coded 0 fails), prompts that end mid-word or with a space (joint tokenization merges
tokens across the boundary and fails), an empty output, a batch without padding, tokenizers
that add a BOS token (as Llama's and Gemma's do) or a BOS and an EOS token by default (so
`add_special_tokens=True`, the default, fails), prompts and outputs of different lengths and a
tokenizer without a pad token (both must raise ValueError).
"""

import torch

from autograder.suite_api import course_tokenizer

GRADED = "tokenize_prompt_and_output"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "more_prompts_than_outputs": "prompt_strs and output_strs of different lengths",
    "tokenizer_without_pad_token": "a tokenizer without a pad token",
}
WARM = ('transformers', 'tokenizers')  # imported by a judge runner started ahead (autograder.judge)
KEYS = ("input_ids", "labels", "response_mask")


def _tokenizer(pad_token, special=None):
    """The course tokenizer; `pad_token` replaces its pad token ("none": no pad token at all);
    `special="bos"` / `"bos_eos"` makes it add <|im_start|> before (and <|endoftext|> after)
    every text unless called with add_special_tokens=False."""
    import copy

    from tokenizers import processors

    tok = copy.deepcopy(course_tokenizer())
    if pad_token == "none":
        tok.pad_token = None
    elif pad_token is not None:
        tok.pad_token = pad_token
    if special:
        bos, eos = "<|im_start|>", "<|endoftext|>"
        single = f"{bos} $A" + (f" {eos}" if special == "bos_eos" else "")
        tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single=single, pair=f"{single} $B", special_tokens=[(t, tok.convert_tokens_to_ids(t)) for t in (bos, eos)])
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


def call(fn, inputs: dict) -> dict:
    tokenizer = _tokenizer(inputs["pad_token"], inputs.get("special"))
    try:
        out = fn(list(inputs["prompts"]), list(inputs["outputs"]), tokenizer)
    except ValueError:
        return {"raises_value_error": True}
    if not isinstance(out, dict):
        return {"returned a dict": False}
    return {**{k: out[k] for k in KEYS if k in out}, "raises_value_error": False}
