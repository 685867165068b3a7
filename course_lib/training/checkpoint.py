"""Checkpoints that resume exactly, and the per-step metrics file.

A checkpoint is a folder `OUTPUT/checkpoints/step_000120/` holding
- the model and tokenizer (`save_pretrained`: loadable on their own, e.g. as the next stage's model),
- `trainer_state.pt`: optimizer, LR scheduler, the RNG states (python, numpy, torch, cuda),
  the step, the data position and the run's config.
It is written to a temporary folder and renamed into place, and `OUTPUT/checkpoints/latest`
names it only afterwards, so a run killed while saving still has its previous checkpoint.

`metrics.jsonl` gets one line per step. On resume the lines after the checkpoint's step (written
by the killed run after its last checkpoint) are dropped, so the file reads as if the run had
never stopped.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from pathlib import Path

import torch

from .config import config_to_dict

STATE_FILE = "trainer_state.pt"


def _rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:  # pragma: no cover
        pass
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_dir(output_dir: str | os.PathLike) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(output_dir, step: int, model, tokenizer, optimizer, scheduler, extra: dict | None = None,
                    keep: int = 2) -> Path:
    """Write checkpoint `step` atomically and point `latest` at it; keep the newest `keep`."""
    root = checkpoint_dir(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": _rng_state(),
            "extra": extra or {},
        },
        tmp / STATE_FILE,
    )
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    latest_tmp = root / ".latest.tmp"
    latest_tmp.write_text(final.name)
    os.replace(latest_tmp, root / "latest")
    if keep and keep > 0:
        old = sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep]
        for p in old:
            shutil.rmtree(p, ignore_errors=True)
    return final


def latest_checkpoint(output_dir) -> Path | None:
    root = checkpoint_dir(output_dir)
    pointer = root / "latest"
    if pointer.is_file():
        path = root / pointer.read_text().strip()
        if (path / STATE_FILE).is_file():
            return path
    candidates = sorted(p for p in root.glob("step_*") if (p / STATE_FILE).is_file())
    return candidates[-1] if candidates else None


def load_checkpoint(path, model, optimizer=None, scheduler=None) -> dict:
    """Load weights, optimizer, scheduler and RNG states from `path`; return the trainer state."""
    from safetensors.torch import load_file

    path = Path(path)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"checkpoint {path} holds no model weights (*.safetensors)")
    weights = {}
    for f in files:
        weights.update(load_file(f))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # tied embeddings are saved once: a missing lm_head.weight is fine when it is tied
    missing = [m for m in missing if not (m == "lm_head.weight" and getattr(model.config, "tie_word_embeddings", False))]
    if missing or unexpected:
        raise RuntimeError(f"checkpoint {path} does not fit the model: missing {missing}, unexpected {unexpected}")
    state = torch.load(path / STATE_FILE, weights_only=False)
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["rng"])
    return state


class MetricsLog:
    """Appends one JSON object per line to `OUTPUT/metrics.jsonl` (and keeps them in memory)."""

    def __init__(self, output_dir=None, resume_step: int | None = None):
        self.records: list[dict] = []
        self.path = Path(output_dir) / "metrics.jsonl" if output_dir else None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            self.path.write_text("")
            return
        kept = []
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # a line cut by the kill
                    continue
                if rec.get("step", 0) <= resume_step:
                    kept.append(rec)
        self.records = kept
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def log(self, record: dict) -> None:
        record = {k: _jsonable(v) for k, v in record.items()}
        self.records.append(record)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()


def _jsonable(v):
    if isinstance(v, torch.Tensor):
        v = v.item() if v.numel() == 1 else v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


class NonFiniteLossError(RuntimeError):
    """The loss or the gradient norm became NaN/inf; the run stopped, its last checkpoint kept."""


def restore_checkpoint(cfg, resume: bool, model, optimizer, scheduler, extra_state=None) -> int:
    """The step a run starts from: 0, or, with `resume`, that of the last checkpoint in
    `cfg.output_dir`, whose model, optimizer, scheduler and RNG states are restored (and the state
    of `extra_state`, which the checkpoint must then hold)."""
    if not resume:
        return 0
    if not cfg.output_dir:
        raise ValueError("resume needs output_dir")
    ckpt = latest_checkpoint(cfg.output_dir)
    if ckpt is None:
        return 0
    state = load_checkpoint(ckpt, model, optimizer, scheduler)
    if extra_state is not None:
        saved = state.get("extra", {}).get("extra_state")
        if saved is None:
            raise ValueError(f"checkpoint {ckpt} holds no trainer extra state (was it written by another trainer? "
                             f"its kind: {state.get('extra', {}).get('kind')!r})")
        extra_state.load_state_dict(saved)
    return state["step"]


def saved_extra_state(output_dir) -> dict | None:
    """The trainer extra state of the latest checkpoint in `output_dir` (None when there is no checkpoint),
    read before the run's optimizer exists: DPO's pairs decide its number of steps, hence its schedule.
    Memory-mapped, so the optimizer's tensors in the same file are not read."""
    ckpt = latest_checkpoint(output_dir) if output_dir else None
    if ckpt is None:
        return None
    state = torch.load(ckpt / STATE_FILE, weights_only=False, mmap=True)
    saved = state.get("extra", {}).get("extra_state")
    if saved is None:
        raise ValueError(f"checkpoint {ckpt} holds no trainer extra state (was it written by another trainer? "
                         f"its kind: {state.get('extra', {}).get('kind')!r})")
    return saved


def write_run_config(output_dir, kind: str, cfg) -> None:
    """`output_dir/config.json`: the run's kind and every setting, for the record."""
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    (Path(output_dir) / "config.json").write_text(json.dumps({"kind": kind, **config_to_dict(cfg)}, indent=2))
