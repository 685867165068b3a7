"""PNG curves of a run's `metrics.jsonl` (matplotlib, no display needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def read_metrics(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _series(records: list[dict], kind: str, key: str):
    xs, ys = [], []
    for r in records:
        if r.get("kind", "train") == kind and isinstance(r.get(key), (int, float)):
            xs.append(r["step"])
            ys.append(r[key])
    return xs, ys


def _smooth(ys: list[float], window: int) -> list[float]:
    if window <= 1:
        return ys
    out, acc = [], []
    for y in ys:
        acc.append(y)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


TRAIN_KEYS = {
    "sft": ["loss", "nll_per_token", "grad_norm", "lr"],
    "grpo": ["train_reward", "format_reward", "token_entropy", "response_length", "grad_norm", "clip_fraction"],
    "dpo": ["loss", "reward_margin", "reward_accuracy", "chosen_log_probs", "rejected_log_probs", "grad_norm"],
}


def plot_run(run_dir: str | os.PathLike, out: str | os.PathLike | None = None, kind: str | None = None) -> Path:
    """Plot the train metrics (smoothed) and eval accuracies of one run into `curves.png`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    if kind is None:
        kind = ("dpo" if any("reward_margin" in r for r in records) else
                "grpo" if any("train_reward" in r for r in records) else "sft")
    keys = [k for k in TRAIN_KEYS[kind] if _series(records, "train", k)[0]]
    has_eval = bool(_series(records, "eval", "answer_reward")[0])
    n = len(keys) + int(has_eval)
    cols = min(3, max(n, 1))
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        xs, ys = _series(records, "train", key)
        ax.plot(xs, ys, alpha=0.3, color="C0")
        ax.plot(xs, _smooth(ys, max(1, len(ys) // 20)), color="C0")
        ax.set_title(key)
        ax.set_xlabel("step")
    if has_eval:
        ax = axes.flat[len(keys)]
        for i, key in enumerate(["format_reward", "answer_reward"]):
            xs, ys = _series(records, "eval", key)
            ax.plot(xs, ys, marker="o", color=f"C{i + 1}", label=key)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("held-out eval")
        ax.set_xlabel("step")
        ax.legend()
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(f"{kind}: {run_dir.name}")
    fig.tight_layout()
    out = Path(out) if out else run_dir / "curves.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_demo(stages: dict[str, list[dict]], summary: dict, out: str | os.PathLike) -> Path:
    """The demo's figure: SFT loss, GRPO train reward, and held-out accuracy per stage (bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    ax = axes[0]
    offset = 0
    for name, color in (("sft", "C0"), ("sft_more", "C3")):
        xs, ys = _series(stages.get(name, []), "train", "nll_per_token")
        if xs:
            ax.plot([x + offset for x in xs], _smooth(ys, 5), color=color, label=name)
            offset = xs[-1] + offset
    ax.set_title("SFT: NLL per response token")
    ax.set_xlabel("optimizer step")
    ax.legend()
    ax = axes[1]
    xs, ys = _series(stages.get("grpo", []), "train", "train_reward")
    if xs:
        ax.plot(xs, ys, alpha=0.3, color="C2")
        ax.plot(xs, _smooth(ys, 10), color="C2", label="train reward (answer)")
    xs, ys = _series(stages.get("grpo", []), "eval", "answer_reward")
    if xs:
        ax.plot(xs, ys, "o-", color="C1", label="held-out answer reward")
    ax.set_title("GRPO from the SFT checkpoint")
    ax.set_xlabel("GRPO step")
    ax.set_ylim(0, 1)
    ax.legend()
    ax = axes[2]
    names = [k for k in ("base", "sft", "sft_more", "grpo") if k in summary]
    width = 0.38
    for i, key in enumerate(["format_reward", "answer_reward"]):
        vals = [summary[k][key] for k in names]
        pos = [j + (i - 0.5) * width for j in range(len(names))]
        bars = ax.bar(pos, vals, width, label=key, color=f"C{i + 4}")
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0, 1.25)  # room for the legend above the bars
    n = summary.get(names[0], {}).get("n", "")
    ax.set_title(f"held-out accuracy ({n} problems, greedy)")
    ax.legend(loc="upper left", ncol=2)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
