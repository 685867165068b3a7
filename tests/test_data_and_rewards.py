"""Tokenization, the GSM8K helpers, the r1_zero reward, and errors on malformed data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from course_lib import (
    DataFormatError,
    extract_gsm8k_answer,
    gsm8k_to_r1_zero,
    load_gsm8k,
    load_problems,
    r1_zero_prompt_template,
    r1_zero_reward_fn,
    read_jsonl,
    tokenize_prompt_and_output,
)

SHARED_GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


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


@pytest.mark.parametrize(
    "text, expected",
    [("He has 3 + 4 = <<3+4=7>>7.\n#### 7", "7"), ("...\n#### 1,080", "1080"), ("x\n#### -5 ", "-5"), ("#### 0.5", "0.5")],
)
def test_extract_gsm8k_answer(text, expected):
    assert extract_gsm8k_answer(text) == expected


def test_extract_gsm8k_answer_without_marker_is_a_clear_error():
    with pytest.raises(ValueError, match="no '#### N'"):
        extract_gsm8k_answer("the answer is 5")


def test_gsm8k_to_r1_zero():
    ex = {"question": "Tom has 3 apples and buys 4. How many?", "answer": "Tom has 3 + 4 = <<3+4=7>>7 apples.\n#### 7"}
    r = gsm8k_to_r1_zero(ex)
    template = r1_zero_prompt_template()
    assert r["prompt"] == template.replace("{question}", ex["question"])
    assert r["prompt"].endswith("Assistant: <think>")
    assert r["output"] == " Tom has 3 + 4 = <<3+4=7>>7 apples. </think> <answer> 7 </answer>"
    assert r["ground_truth"] == "7"
    assert r1_zero_reward_fn(r["output"], r["ground_truth"])["reward"] == 1.0


@pytest.mark.parametrize(
    "answer, gold",
    [("1,080", "1080"), ("1080", "1,080"), ("\\boxed{72}", "72"), ("0.5", "1/2"), ("72.0", "72"), ("$18", "18"), (" 18. ", "18"), ("\\frac{3}{4}", "0.75")],
)
def test_reward_grades_equivalent_answers_equal(answer, gold):
    assert r1_zero_reward_fn(f"reasoning </think> <answer> {answer} </answer>", gold) == {
        "format_reward": 1.0, "answer_reward": 1.0, "reward": 1.0,
    }


@pytest.mark.parametrize(
    "response, expected",
    [
        ("reasoning </think> <answer> 71 </answer>", (1.0, 0.0, 0.0)),
        ("reasoning </think><answer> 72 </answer>", (0.0, 0.0, 0.0)),  # no space: format broken
        ("reasoning </think> <answer> 72", (0.0, 0.0, 0.0)),  # never closed
        ("the answer is 72", (0.0, 0.0, 0.0)),
        ("reasoning </think> <answer>  </answer>", (1.0, 0.0, 0.0)),
        ("reasoning </think> <answer> 7 </answer> <answer> 72 </answer>", (1.0, 1.0, 1.0)),  # last block counts
    ],
)
def test_reward_format_and_answer(response, expected):
    r = r1_zero_reward_fn(response, "72")
    assert (r["format_reward"], r["answer_reward"], r["reward"]) == expected


@pytest.mark.skipif(not SHARED_GSM8K.is_dir(), reason="the shared GSM8K copy is not on this machine")
def test_reward_on_every_gsm8k_test_gold_answer():
    examples = load_gsm8k("test", SHARED_GSM8K)
    assert len(examples) == 1319
    failures = []
    for ex in examples:
        r = gsm8k_to_r1_zero(ex)
        gold = extract_gsm8k_answer(ex["answer"])
        stated = ex["answer"].rsplit("####", 1)[1].strip()  # as written, commas included
        for response in (r["output"], f" ... </think> <answer> {stated} </answer>"):
            if r1_zero_reward_fn(response, gold)["reward"] != 1.0:
                failures.append((gold, response[-40:]))
    assert not failures, failures[:5]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_malformed_jsonl_line_names_file_and_line(tmp_path):
    good = json.dumps({"question": "q", "answer": "a\n#### 1"})
    write(tmp_path / "train.jsonl", [good, good, '{"question": "q", "answer": ', good])
    with pytest.raises(DataFormatError, match=r"train\.jsonl:3: not valid JSON"):
        load_gsm8k("train", tmp_path)


@pytest.mark.parametrize(
    "line, message",
    [('{"question": "q"}', "missing field 'answer'"), ('["q", "a"]', "expected a JSON object"), ('{"question": 1, "answer": "a"}', "field 'question' must be a string")],
)
def test_bad_records_name_file_line_and_field(tmp_path, line, message):
    good = json.dumps({"question": "q", "answer": "a\n#### 1"})
    path = write(tmp_path / "test.jsonl", [good, "", line])
    with pytest.raises(DataFormatError, match=rf"test\.jsonl:3: {message}"):
        read_jsonl(path)


def test_load_gsm8k_local_folder_and_missing_split(tmp_path):
    write(tmp_path / "test.jsonl", [json.dumps({"question": "q", "answer": "a\n#### 1"})])
    assert load_gsm8k("test", tmp_path) == [{"question": "q", "answer": "a\n#### 1"}]
    with pytest.raises(FileNotFoundError, match="no train.jsonl"):
        load_gsm8k("train", tmp_path)
    with pytest.raises(FileNotFoundError, match="no test.jsonl"):
        load_problems(str(tmp_path / "nowhere"), "test")


def test_load_gsm8k_offline_error_names_both_sources(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as err:
        load_gsm8k("test")
    assert "data_dir=" in str(err.value) and "openai/gsm8k" in str(err.value)
