"""Helpers the tests share: the course tokenizer, small random Qwen2 models, problems, a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent


def course_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(REPO / "data" / "tokenizer", local_files_only=True)


def random_qwen2(tokenizer, seed: int = 0, hidden: int = 32, layers: int = 2):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=512, tie_word_embeddings=True,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return Qwen2ForCausalLM(cfg).eval()


def save_random_model(path: Path, seed: int = 0) -> Path:
    tok = course_tokenizer()
    model = random_qwen2(tok, seed)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def problems(n: int, split: str = "train") -> list[dict]:
    from course_lib import load_problems

    return load_problems("arith", split)[:n]


def run_cli(args: list[str], cwd: Path, timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)
