"""The embedded world: arithmetic data, the course tokenizer, the tiny Qwen2 base and Gemma 2."""

from __future__ import annotations

import json
import random
import re
import string

import pytest
import torch

from course_lib.world.arith_data import (
    FAMILIES,
    TEMPLATES,
    arithmetic_fact,
    check_calculator_notes,
    generate_problem,
    generate_splits,
)
from course_lib.gsm8k import extract_gsm8k_answer, gsm8k_to_r1_zero, load_gsm8k, load_problems
from course_lib.paths import DATA_DIR
from course_lib.rewards import r1_zero_reward_fn
from course_lib.world.tiny_models import TINY_MODELS, TOKENIZER_DIR, count_parameters, greedy_complete, load_tiny

TAGS = ["<think>", "</think>", "<answer>", "</answer>"]


# ---------------------------------------------------------------- data


@pytest.fixture(scope="module")
def splits():
    return load_problems("arith", "train"), load_problems("arith", "test")


def test_generator_is_deterministic():
    a = generate_splits(300, 100, seed=3)
    b = generate_splits(300, 100, seed=3)
    assert a == b
    assert generate_splits(300, 100, seed=4) != a
    rng1, rng2 = random.Random(5), random.Random(5)
    assert [generate_problem(rng1) for _ in range(50)] == [generate_problem(rng2) for _ in range(50)]


def test_committed_splits_are_the_generator_output(splits):
    """`python scripts/make_world.py data` (seed 0) rebuilds exactly the committed files."""
    train, test = splits
    regen_train, regen_test = generate_splits(len(train), len(test), seed=0)
    assert train == regen_train, "data/arith/train.jsonl differs from generate_splits(seed=0): rerun make_world.py data"
    assert test == regen_test, "data/arith/test.jsonl differs from generate_splits(seed=0): rerun make_world.py data"


def test_splits_are_large_and_disjoint(splits):
    train, test = splits
    assert len(train) >= 8000 and len(test) >= 1000
    train_q, test_q = {p["question"] for p in train}, {p["question"] for p in test}
    assert len(train_q) == len(train) and len(test_q) == len(test), "duplicate questions inside a split"
    assert not train_q & test_q, "a question is in both splits"


def test_same_loader_as_gsm8k(splits):
    assert load_gsm8k("test", DATA_DIR / "arith") == splits[1]
    assert set(splits[1][0]) == {"question", "answer"}


def test_every_gold_answer_is_extracted_and_graded_one(splits):
    for p in splits[0] + splits[1]:
        ex = gsm8k_to_r1_zero(p)
        assert ex["ground_truth"] == extract_gsm8k_answer(p["answer"])
        assert re.fullmatch(r"\d+", ex["ground_truth"]), p
        reward = r1_zero_reward_fn(ex["output"], ex["ground_truth"])
        assert reward == {"format_reward": 1.0, "answer_reward": 1.0, "reward": 1.0}, (p, reward)
        assert "<think>" not in p["question"] + p["answer"]


def test_answers_look_like_gsm8k(splits):
    steps = set()
    for p in splits[0] + splits[1]:
        lines = p["answer"].split("\n")
        assert lines[-1].startswith("#### ")
        assert all(re.search(r"<<[^>]+=\d+>>\d+", line) for line in lines[:-1]), p["answer"]
        assert not check_calculator_notes(p["answer"]), p["answer"]
        # the last note's result is the final answer
        assert re.findall(r">>(\d+)", p["answer"])[-1] == lines[-1][5:]
        steps.add(len(lines) - 1)
    assert steps == {1, 2, 3}


def test_templates_parse():
    fields = {name: "x" for _, name, _, _ in (t for tpl in TEMPLATES.values() for s in tpl for t in string.Formatter().parse(s)) if name}
    for key, templates in TEMPLATES.items():
        assert templates, key
        for t in templates:
            text = t.format(**fields)
            assert "{" not in text and "}" not in text, (key, t)
    rng = random.Random(0)
    for family in FAMILIES:
        for steps in (1, 2, 3):
            for _ in range(30):
                p = generate_problem(rng, steps=steps, family=family)
                assert p["answer"].count("\n") == steps
                assert "{" not in p["question"] and p["question"].endswith("?")


def test_arithmetic_facts_are_true():
    rng = random.Random(0)
    for _ in range(500):
        lhs, rhs = arithmetic_fact(rng).split(" = ")
        assert eval(lhs) == int(rhs) >= 0  # noqa: S307


# ---------------------------------------------------------------- tokenizer


def test_tokenizer_basics(tok):
    assert 500 <= len(tok) <= 2000
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>"
    assert tok.pad_token_id != tok.eos_token_id
    assert tok("12 + 7", add_special_tokens=False)["input_ids"] == tok("12 + 7")["input_ids"], "special tokens added"
    for digit in string.digits:
        assert len(tok(digit)["input_ids"]) == 1
    pieces = tok.convert_ids_to_tokens(tok("x 1234567890 y")["input_ids"])
    assert [p for p in pieces if any(c.isdigit() for c in p)] == list("1234567890"), pieces


def test_format_tags_are_ordinary_single_tokens(tok, splits):
    for tag in TAGS:
        ids = tok(tag)["input_ids"]
        assert len(ids) == 1, tag
        assert tag not in tok.all_special_tokens
    ex = gsm8k_to_r1_zero(splits[1][0])
    ids = tok(ex["prompt"])["input_ids"] + tok(ex["output"])["input_ids"] + [tok.eos_token_id]
    text = tok.decode(ids, skip_special_tokens=True)
    assert text == ex["prompt"] + ex["output"], "decoding does not round-trip"
    assert r1_zero_reward_fn(tok.decode(tok(ex["output"])["input_ids"], skip_special_tokens=True), ex["ground_truth"])["reward"] == 1.0
    assert len(ids) < 256


def test_sequences_are_short(tok, splits):
    longest = max(len(tok(e["prompt"] + e["output"])["input_ids"]) for e in map(gsm8k_to_r1_zero, splits[1]))
    assert longest < 256, longest


def test_tokenizer_round_trip(tok, tmp_path):
    from transformers import AutoTokenizer

    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    text = "Assistant: <think> Tom has 12 + 7 = <<12+7=19>>19 apples. </think> <answer> 19 </answer><|endoftext|>"
    assert again(text)["input_ids"] == tok(text)["input_ids"]
    assert again.chat_template == tok.chat_template
    assert (again.eos_token_id, again.pad_token_id) == (tok.eos_token_id, tok.pad_token_id)


def test_chat_template_thinking_modes(tok):
    msgs = [{"role": "user", "content": "Tom has 3 apples. How many apples does Tom have?"}]
    open_ = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    closed = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False, open_thinking=False)
    assert open_ == tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False, open_thinking=True)
    assert open_.startswith("<|im_start|>user\nTom has 3")
    assert open_.endswith("<|im_start|>assistant\n<think>\n")
    assert closed.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    no_gen = tok.apply_chat_template(msgs, add_generation_prompt=False, tokenize=False)
    assert no_gen.endswith("<|im_end|>\n") and "<think>" not in no_gen
    enc = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    ids = enc["input_ids"] if not isinstance(enc, list) else enc
    assert tok.decode(ids) == open_


# ---------------------------------------------------------------- models


@pytest.fixture(scope="module")
def base():
    return load_tiny("qwen2-base")


@pytest.fixture(scope="module")
def gemma():
    return load_tiny("gemma2-softcap")


@pytest.mark.parametrize("name", list(TINY_MODELS))
def test_model_files(name):
    folder = TINY_MODELS[name]
    size = (folder / "model.safetensors").stat().st_size
    assert size <= 10 * 2**20, f"{name}: {size} bytes"
    cfg = json.loads((folder / "config.json").read_text())
    gen = json.loads((folder / "generation_config.json").read_text())
    assert cfg["eos_token_id"] == gen["eos_token_id"] == 1 and cfg["pad_token_id"] == gen["pad_token_id"] == 0
    assert (folder / "tokenizer.json").read_text() == (TOKENIZER_DIR / "tokenizer.json").read_text(), \
        "the model folder's tokenizer copy differs from data/tokenizer"


def test_load_tiny_offline_and_round_trip(base, tmp_path, monkeypatch):
    model, tok = base
    assert model.config.model_type == "qwen2" and 0.5e6 < count_parameters(model) < 1.5e6
    assert model.config.max_position_embeddings >= 512
    assert model.config.vocab_size == len(tok)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again, tok2 = load_tiny(tmp_path)
    x = torch.tensor([tok("12 + 7 = 19\n3 * 4 =")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(x).logits, again(x).logits)
    assert tok2("12 + 7")["input_ids"] == tok("12 + 7")["input_ids"]
    with pytest.raises(FileNotFoundError, match="neither a tiny model name"):
        load_tiny(tmp_path / "nowhere")


def test_base_model_is_a_base_model(base, splits):
    """Zero-shot on r1_zero prompts: about no format reward (it never saw the tags)."""
    model, tok = base
    examples = [gsm8k_to_r1_zero(p) for p in splits[1][:200]]
    responses = greedy_complete(model, tok, [e["prompt"] for e in examples], max_new_tokens=48)
    fmt = sum(r1_zero_reward_fn(r, e["ground_truth"])["format_reward"] for r, e in zip(responses, examples)) / 200
    assert fmt < 0.1, f"zero-shot format reward {fmt}"


def test_base_model_knows_some_arithmetic(base):
    """Greedy completion of `a op b =` is right more often than chance.

    Guessing a result uniformly from its range is right about 1 time in 100; 200 equations at
    that rate give 20 or more right with probability below 1e-7, so 10% is far above chance
    (the committed model, pretrained for 1,500 steps, scores 20.5% here: 29% of additions, 8% of
    subtractions, 22% of products).
    """
    model, tok = base
    rng = random.Random(12345)
    facts = [arithmetic_fact(rng) for _ in range(200)]
    outs = greedy_complete(model, tok, [f.rsplit("=", 1)[0] + "=" for f in facts], max_new_tokens=5)
    acc = sum(o.strip().split("\n")[0].strip() == f.rsplit("= ", 1)[1] for o, f in zip(outs, facts)) / len(facts)
    assert acc >= 0.10, f"plain arithmetic accuracy {acc} is close to chance level"


def test_base_model_solves_problems_in_its_own_format(base, splits):
    """Held-out problems asked in the pretraining form (`Question: ...\nAnswer:`) are mostly solved.

    This is the latent ability the course's story rests on: the base model can already do the
    arithmetic, it only lacks the r1_zero format. SFT on a few worked solutions teaches the
    format but damages part of the ability (answer reward ~0.52 with 128 of them); GRPO, which
    rewards final answers only, brings it back. The committed model scores 0.94 on the first 300.
    """
    model, tok = base
    problems = splits[1][:200]
    outs = greedy_complete(model, tok, [f"Question: {p['question']}\nAnswer:" for p in problems],
                           max_new_tokens=100, batch_size=200)
    gold = [p["answer"].split("####")[-1].strip() for p in problems]
    got = [o.split("####")[1].split("\n")[0].strip() if "####" in o else None for o in outs]
    acc = sum(g == a for g, a in zip(got, gold)) / len(problems)
    assert acc >= 0.8, f"plain-format accuracy {acc}: the base model lost what the demo's GRPO stage draws on"


def test_sft_model_answers_in_the_format_about_half_right(splits):
    """`qwen2-sft`, the RL notebooks' starting point: the format is learned, the answers are mixed,
    so GRPO groups carry signal (its build measured 0.985 format / 0.523 answer on 1,000)."""
    model, tok = load_tiny("qwen2-sft")
    examples = [gsm8k_to_r1_zero(p) for p in splits[1][:200]]
    responses = greedy_complete(model, tok, [e["prompt"] for e in examples], max_new_tokens=100, batch_size=200)
    scores = [r1_zero_reward_fn(r, e["ground_truth"]) for r, e in zip(responses, examples)]
    fmt = sum(s["format_reward"] for s in scores) / len(scores)
    ans = sum(s["answer_reward"] for s in scores) / len(scores)
    assert fmt >= 0.95 and 0.3 <= ans <= 0.75, (fmt, ans)


def test_gemma_config_has_the_real_softcap_field(gemma):
    model, tok = gemma
    assert model.config.model_type == "gemma2"
    assert model.config.final_logit_softcapping == 30.0
    assert "final_logits_softcapping" not in model.config.to_dict()  # the misspelling caps nothing
    assert model.config.vocab_size == len(tok)


def test_gemma_softcap_changes_sampled_log_probs(gemma, splits):
    model, tok = gemma
    cap = model.config.final_logit_softcapping
    torch.manual_seed(0)
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in splits[1][:16]]
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True)
    tok.padding_side = "right"
    with torch.no_grad():
        seq = model.generate(**enc, do_sample=True, top_k=0, top_p=1.0, temperature=1.0,
                             max_new_tokens=16, min_new_tokens=16, pad_token_id=tok.pad_token_id)
        mask = torch.cat([enc["attention_mask"], torch.ones_like(seq[:, enc["input_ids"].shape[1]:])], 1)
        out = model(input_ids=seq, attention_mask=mask, output_hidden_states=True)
        raw = model.lm_head(out.hidden_states[-1])
    # the forward already applies the cap: .logits == cap * tanh(raw / cap)
    torch.testing.assert_close(out.logits, cap * torch.tanh(raw / cap), rtol=1e-5, atol=1e-4)
    assert raw.abs().amax(-1).mean() > cap, "raw logits are not large enough for the cap to matter"
    start = enc["input_ids"].shape[1]
    y = seq[:, start:, None]
    lp_cap = torch.log_softmax(out.logits[:, start - 1 : -1], -1).gather(-1, y)[..., 0]
    lp_raw = torch.log_softmax(raw[:, start - 1 : -1], -1).gather(-1, y)[..., 0]
    gap = (lp_cap - lp_raw).abs().mean().item()
    assert gap >= 0.1, f"mean log-prob gap {gap:.3f} nat"
    # and greedy decoding cannot see it: tanh is monotone, so the argmax is the same
    assert torch.equal(out.logits.argmax(-1), raw.argmax(-1))


def test_think_model_follows_both_modes_and_only_thinking_gets_answers_right():
    """`qwen2-think`, notebook 13's start: asked to think it writes the worked steps in `<think>`, asked
    not to it writes the answer block alone, and the thinking is what gets answers right (its build
    measured on 500 test problems: see its build_info.json)."""
    from course_lib.rollouts import make_engine
    from course_lib.training.thinking import evaluate_modes, load_conversations

    convs = load_conversations()
    assert len(convs) == 2000 and 900 <= sum(c["thinking"] for c in convs) <= 1100
    model, tok = load_tiny("qwen2-think")
    modes = evaluate_modes(make_engine("fast", model, tok), tok, load_problems("arith", "test")[:100])
    assert modes["thinking"]["followed"] >= 0.95 and modes["direct"]["followed"] >= 0.95, modes
    assert modes["thinking"]["accuracy"] >= 0.6 and modes["direct"]["accuracy"] <= 0.3, modes
    assert modes["thinking"]["tokens"] > 4 * modes["direct"]["tokens"], modes
