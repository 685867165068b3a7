"""tokenize_prompt_and_output (notebook 01): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import functools
import pytest
import torch
from hypothesis import given, strategies as st
from tokenizers import models, pre_tokenizers, Tokenizer
from transformers import PreTrainedTokenizerFast

from course_lib import tokenize_prompt_and_output
from tests.helpers import course_tokenizer, PROPERTY_SETTINGS


# ---------------------------------------------------------------- the reference
@pytest.fixture(scope="module")
def word_tokenizer():
    """A whitespace word-level tokenizer: token boundaries are obvious, so offsets can be checked."""
    words = ["<pad>", "<unk>"] + "the cat sat on a mat and ran away fast 1 2 3 4 5 6 7 8 9 0".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>")


def test_tokenize_prompt_and_output_shift_mask_and_padding(word_tokenizer):
    prompts = ["the cat", "a mat and the cat"]
    outputs = ["sat on a mat", "ran"]
    out = tokenize_prompt_and_output(prompts, outputs, word_tokenizer)
    ids = lambda s: word_tokenizer(s, add_special_tokens=False)["input_ids"]
    full0 = ids("the cat") + ids("sat on a mat")  # 6 tokens: the longest
    full1 = ids("a mat and the cat") + ids("ran")  # 6 tokens too
    assert out["input_ids"].shape == out["labels"].shape == out["response_mask"].shape == (2, 5)
    assert out["input_ids"][0].tolist() == full0[:-1]
    assert out["labels"][0].tolist() == full0[1:]
    assert out["input_ids"][1].tolist() == full1[:-1]
    assert out["labels"][1].tolist() == full1[1:]
    # label j is full token j+1: output tokens of example 0 are full[2:6] -> labels 1..4
    assert out["response_mask"][0].tolist() == [False, True, True, True, True]
    assert out["response_mask"][1].tolist() == [False, False, False, False, True]
    assert out["input_ids"].dtype == out["labels"].dtype == torch.long


def test_tokenize_pads_right_and_masks_no_padding(word_tokenizer):
    out = tokenize_prompt_and_output(["the", "the cat sat"], ["cat", "on a mat and ran away"], word_tokenizer)
    pad = word_tokenizer.pad_token_id
    # example 0 has 2 tokens, the batch max is 9: full = [the, cat, pad * 7]
    assert out["input_ids"].shape == (2, 8)
    assert out["labels"][0].tolist() == [word_tokenizer.convert_tokens_to_ids("cat")] + [pad] * 7
    assert out["response_mask"][0].tolist() == [True] + [False] * 7
    assert out["response_mask"][1].sum().item() == 6
    assert not out["response_mask"][out["labels"] == pad].any()


def test_tokenize_rejects_mismatched_lists(word_tokenizer):
    with pytest.raises(ValueError, match="2 prompts but 1 outputs"):
        tokenize_prompt_and_output(["a", "b"], ["c"], word_tokenizer)


@functools.lru_cache(maxsize=1)
def _course_tokenizer():
    return course_tokenizer()


texts = st.text(alphabet="ab xy1 2+=<>:?\n", min_size=1, max_size=25)


@PROPERTY_SETTINGS
@given(st.lists(st.tuples(texts, st.text(alphabet="ab xy1 2+=<>:?\n", max_size=25)), min_size=1, max_size=4))
def test_reference_layout_on_the_course_tokenizer(pairs):
    tok = _course_tokenizer()
    prompts, outputs = [p for p, _ in pairs], [o for _, o in pairs]
    out = tokenize_prompt_and_output(prompts, outputs, tok)
    P = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    O = [len(tok(o, add_special_tokens=False)["input_ids"]) for o in outputs]
    L = max(p + o for p, o in zip(P, O))
    ids, labels, mask = out["input_ids"], out["labels"], out["response_mask"]
    assert ids.shape == labels.shape == mask.shape == (len(pairs), L - 1)
    assert ids.dtype == labels.dtype == torch.long and mask.dtype == torch.bool
    assert torch.equal(labels[:, :-1], ids[:, 1:])  # the shift by one
    for i, (p, o) in enumerate(zip(P, O)):
        assert mask[i].tolist() == [p - 1 <= j < p + o - 1 for j in range(L - 1)]
        assert (labels[i, p + o - 1:] == tok.pad_token_id).all()  # right padding with the pad id
