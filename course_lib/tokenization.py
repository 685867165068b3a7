"""Prompt/response tokenization for training: the shift by one and the response mask."""

from __future__ import annotations

import torch


def tokenize_prompt_and_output(prompt_strs: list[str], output_strs: list[str], tokenizer) -> dict[str, torch.Tensor]:
    """Tokenize prompts and outputs separately, concatenate, pad, and shift for next-token loss.

    For example i, with prompt tokens p (length P) and output tokens o (length O):
        full_i   = p + o + [pad] * (max_len - P - O)          max_len = max_i (P_i + O_i)
        input_ids[i] = full_i[:-1]        labels[i] = full_i[1:]
        response_mask[i, j] = 1  iff  labels[i, j] is an output token  iff  P-1 <= j < P+O-1

    Prompt and output are tokenized apart (a prompt ending mid-word or with a space must not
    merge with the output's first token) and no special tokens are added, even by a tokenizer
    that adds a BOS or EOS by default (the chat format, if any, is already in the strings).
    Padding is on the right with `tokenizer.pad_token_id`, whatever its id; an empty output has
    no response position.

    Returns:
        {"input_ids": (B, max_len-1) long, "labels": (B, max_len-1) long,
         "response_mask": (B, max_len-1) bool}
    Raises:
        ValueError: prompt_strs and output_strs of different lengths.
        ValueError: a tokenizer without a pad token (pad_token_id None).
    """
    if len(prompt_strs) != len(output_strs):
        raise ValueError(f"got {len(prompt_strs)} prompts but {len(output_strs)} outputs")
    if tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer has no pad_token_id; set one before batching")
    prompt_ids = tokenizer(list(prompt_strs), add_special_tokens=False)["input_ids"]
    output_ids = tokenizer(list(output_strs), add_special_tokens=False)["input_ids"]
    lengths = [len(p) + len(o) for p, o in zip(prompt_ids, output_ids)]
    max_len = max(lengths)
    batch = len(lengths)

    full = torch.full((batch, max_len), tokenizer.pad_token_id, dtype=torch.long)
    is_output = torch.zeros((batch, max_len), dtype=torch.bool)
    for i, (p, o) in enumerate(zip(prompt_ids, output_ids)):
        full[i, : len(p) + len(o)] = torch.tensor(p + o, dtype=torch.long)
        is_output[i, len(p) : len(p) + len(o)] = True

    return {
        "input_ids": full[:, :-1],
        "labels": full[:, 1:],
        # the mask lives on label positions: label j is token j+1 of the full sequence
        "response_mask": is_output[:, 1:],
    }
