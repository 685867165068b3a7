"""Notebook 09's graded `grpo_train_step`: realistic wrong versions each lose the hidden check.

A student-style implementation (a plain loop, written independently of the reference, slicing
rows itself) passes every hidden case of the `grpo_train_step` suite; each mistake below, one
edit of that same loop, must fail through `autograder.checker.check_hidden`, and in the cases
that exercise what it gets wrong. The functions are defined as if in a notebook (module
`__main__`), so the checker sends them by value to the judge, exactly as a student's cell is.
"""

from __future__ import annotations

import re

import pytest

STUDENT = '''
import torch

MISTAKE = None


def grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size, gradient_accumulation_steps,
                    epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0, kl_coef=0.0, scheduler=None,
                    log_probs_fn=None, train_step_fn=None):
    n = rollout_batch["advantages"].shape[0]
    k = gradient_accumulation_steps
    micro = train_batch_size // k
    n_steps = n // train_batch_size
    batch = dict(rollout_batch)
    if MISTAKE == "old_log_probs_recomputed" and "old_log_probs" in batch:
        with torch.no_grad():  # "the old policy is the policy before the update": recomputed, not taken as given
            batch["old_log_probs"] = log_probs_fn(policy, batch["input_ids"], batch["labels"])["log_probs"]
    out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    epochs = 1 if MISTAKE == "epochs_ignored" else epochs_per_rollout_batch
    for _ in range(epochs):
        for step in range(n_steps):
            if MISTAKE == "strided_train_batches":  # every n_steps-th row: each group split across steps
                rows = torch.arange(step, n, n_steps)
            else:
                rows = torch.arange(step * train_batch_size, (step + 1) * train_batch_size)
            step_loss = 0.0
            for j in range(k):
                if MISTAKE == "zero_grad_between_micro_batches":
                    optimizer.zero_grad(set_to_none=True)
                mb = {key: value[rows[j * micro:(j + 1) * micro]] for key, value in batch.items()}
                scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                log_probs, mask = scored["log_probs"], mb["response_mask"]
                out["token_entropy"].append(float((scored["token_entropy"] * mask).sum() / mask.sum()))
                if kl_coef > 0:
                    log_ratio = mb["ref_log_probs"] - log_probs
                    per_token = torch.exp(log_ratio) - log_ratio - 1
                    kl = ((per_token * mask).sum(-1) / mask.sum(-1)).mean()
                    scale = kl_coef if MISTAKE == "kl_not_divided_by_k" else kl_coef / k
                    sign = -1.0 if MISTAKE == "kl_wrong_sign" else 1.0
                    (sign * scale * kl).backward(retain_graph=True)
                    step_loss += float(sign * scale * kl.detach())
                    out["kl"].append(float(kl))
                loss, meta = train_step_fn(log_probs, mask, k, loss_type, raw_rewards=mb["raw_rewards"],
                                           advantages=mb["advantages"], old_log_probs=mb.get("old_log_probs"),
                                           cliprange=cliprange)
                step_loss += float(loss)
                if "clip_fraction" in meta:
                    out["clip_fraction"].append(float(meta["clip_fraction"]))
                if MISTAKE == "optimizer_step_per_micro_batch":
                    out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
                    optimizer.step()
                    if scheduler is not None:
                        scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                if MISTAKE == "scheduler_stepped_per_micro_batch" and scheduler is not None:
                    scheduler.step()
            if MISTAKE != "optimizer_step_per_micro_batch":
                if MISTAKE == "no_gradient_clipping":
                    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in policy.parameters()
                                                                 if p.grad is not None]))
                    out["grad_norm"].append(float(norm))
                    optimizer.step()
                elif MISTAKE == "clipping_after_the_step":
                    optimizer.step()
                    out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
                else:
                    out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
                    optimizer.step()
                if scheduler is not None and MISTAKE not in ("scheduler_not_stepped", "scheduler_stepped_per_micro_batch"):
                    scheduler.step()
                if MISTAKE != "no_zero_grad":
                    optimizer.zero_grad(set_to_none=True)
            out["loss"].append(step_loss)
    return out
'''

# each mistake, and hidden cases it must fail (it may fail others too)
MISTAKES = {
    "zero_grad_between_micro_batches": ["on_policy_k2", "on_policy_k4"],
    "optimizer_step_per_micro_batch": ["on_policy_k2", "on_policy_k4"],
    "no_zero_grad": ["two_optimizer_steps_per_rollout_batch"],
    "no_gradient_clipping": ["two_optimizer_steps_per_rollout_batch", "grad_clipped_two_steps"],
    "clipping_after_the_step": ["two_optimizer_steps_per_rollout_batch", "grad_clipped_two_steps"],
    "scheduler_not_stepped": ["warmup_schedule_two_epochs"],
    "scheduler_stepped_per_micro_batch": ["warmup_schedule_two_epochs"],
    "epochs_ignored": ["grpo_clip_two_epochs_given_old_log_probs", "temperature_policy"],
    "old_log_probs_recomputed": ["grpo_clip_two_epochs_given_old_log_probs", "temperature_policy"],
    "strided_train_batches": ["two_optimizer_steps_per_rollout_batch", "grad_clipped_two_steps"],
    "kl_wrong_sign": ["kl_penalty_to_reference", "kl_penalty_grpo_clip_k4"],
    "kl_not_divided_by_k": ["kl_penalty_to_reference", "kl_penalty_grpo_clip_k4"],
}


def student(mistake: str | None):
    namespace = {"__name__": "__main__"}
    exec(compile(STUDENT, "<notebook>", "exec"), namespace)
    namespace["MISTAKE"] = mistake
    return namespace["grpo_train_step"]


def failed_cases(fn) -> tuple[bool, set[str], str]:
    from autograder.checker import HiddenCheckFailed, check_hidden

    try:
        check_hidden("grpo_train_step", fn)
    except HiddenCheckFailed as e:
        text = str(e)
        return False, {line.split("FAIL ", 1)[1].split(":", 1)[0] for line in text.splitlines() if "FAIL " in line}, text
    return True, set(), ""


@pytest.mark.slow
def test_a_correct_student_loop_passes_every_hidden_case(hidden_cases):
    passed, failed, text = failed_cases(student(None))
    assert passed, text


@pytest.mark.slow
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_mistake_loses_the_hidden_check(mistake, hidden_cases):
    passed, failed, text = failed_cases(student(mistake))
    assert not passed, f"{mistake} passed every hidden case of grpo_train_step"
    missed = [c for c in MISTAKES[mistake] if c not in failed]
    assert not missed, f"{mistake} passed case(s) {missed} made to catch it:\n{text}"


def test_every_case_a_mistake_names_exists():
    from autograder.engine import load_suite

    names = {name for name, _ in load_suite("grpo_train_step").make_inputs(__import__("torch").Generator().manual_seed(0))}
    assert {c for cases in MISTAKES.values() for c in cases} <= names


# what the notebook's visible self-check says about each mistake (a phrase of its message)
VISIBLE_MESSAGES = {
    "zero_grad_between_micro_batches": "zeroed between micro-batches",
    "optimizer_step_per_micro_batch": "once per train batch and epoch",
    "no_zero_grad": "gradients are left over",
    "no_gradient_clipping": "clip the accumulated gradient before the step",
    "clipping_after_the_step": "clip the accumulated gradient before the step",
    "scheduler_not_stepped": "the scheduler stepped 0 times",
    "scheduler_stepped_per_micro_batch": "scheduler.step() ran between micro-batches",
    "epochs_ignored": "once per train batch and epoch",
    "old_log_probs_recomputed": "never to recompute the old log-probs",
    "strided_train_batches": "so a group stays in one step",
    "kl_wrong_sign": "the KL term has the wrong sign",
    "kl_not_divided_by_k": "must be divided by k",
}


@pytest.mark.slow
def test_the_notebooks_visible_checks_name_each_mistake(monkeypatch):
    """The visible checks of notebook 09 (run as while grading, the hidden check left out) pass the
    student loop and stop each wrong version with the message that names its mistake."""
    from pathlib import Path

    import nbformat

    assert set(VISIBLE_MESSAGES) == set(MISTAKES)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    path = Path(__file__).resolve().parents[1] / "solutions" / "09" / "09_full_grpo.ipynb"
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    test = next(i for i, c in enumerate(cells) if 'check_hidden("grpo_train_step"' in c)
    namespace = {"__name__": "__main__"}
    exec(compile("\n\n".join(cells[:test]), str(path), "exec"), namespace)
    visible = compile(cells[test].split("### BEGIN HIDDEN TESTS")[0], str(path), "exec")
    exec(visible, {**namespace, "grpo_train_step": student(None)})
    for mistake, phrase in VISIBLE_MESSAGES.items():
        with pytest.raises(AssertionError, match=re.escape(phrase)):
            exec(visible, {**namespace, "grpo_train_step": student(mistake)})
