"""The known mistakes of `tokenize_prompt_and_output` (notebook 01): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
