"""course_lib: the reference implementation of every graded function of the course.

Each graded function exists once, in a module at this top level (`tokenization`, `gsm8k`,
`logprobs`, `masking`, `sft`, `grpo`, `rewards`, `kl`, `ppo`, `dpo`, `preferences`, `softcap`,
`thinking`, `batching`, `serving`, `mismatch`); the solution notebooks show this same code and
the autograder's hidden cases are generated from it. Everything else lives in rooms:

- `course_lib.training`: configs, model loading, the SFT and GRPO trainers, evaluation, plots, the
  command line and `make demo`;
- `course_lib.rollouts`: the rollout interface and its engines (Hugging Face, vLLM);
- `course_lib.world`: the embedded tiny world (arithmetic data, tokenizer, tiny models).

`paths` (where the committed files live) and `selfcheck` (the notebooks' `cmp` and `expect`)
are small utilities every room uses.
"""

from .batching import continuous_batch_generate, static_batch_generate
from .dpo import compute_per_instance_dpo_loss, dpo_loss, sequence_log_probs
from .gsm8k import (
    DataFormatError,
    as_r1_zero,
    extract_gsm8k_answer,
    format_r1_zero_prompt,
    gsm8k_to_r1_zero,
    load_gsm8k,
    load_problems,
    r1_zero_prompt_template,
    read_jsonl,
)
from .grpo import (
    compute_group_normalized_rewards,
    compute_grpo_clip_loss,
    compute_naive_policy_gradient_loss,
    compute_policy_gradient_loss,
    grpo_microbatch_train_step,
    grpo_train_step,
)
from .kl import approx_kl, exact_kl, kl_k1, kl_k2, kl_k3
from .logprobs import compute_entropy, get_response_log_probs, log_probs_from_logits
from .masking import masked_mean, masked_normalize
from .mismatch import corrected_grpo_loss, importance_weights, mismatch_report, sampler_log_probs
from .ppo import compute_gae, masked_whiten, ppo_microbatch_train_step, token_level_rewards, value_loss
from .preferences import off_policy_pairs, on_policy_pairs
from .rewards import evaluate, r1_zero_reward_fn
from .serving import rollouts_from_completion
from .sft import sft_microbatch_train_step, sft_train_step
from .softcap import chunked_response_log_probs, final_logits_softcap
from .thinking import (
    assistant_loss_mask,
    remove_empty_think,
    render_conversation,
    split_reasoning,
    thinking_flags,
    thinking_format_reward,
)
from .tokenization import tokenize_prompt_and_output

# The embedded tiny world (data generator, tiny models); imported lazily by name so that
# `import course_lib` stays light for the autograder's fresh processes.
_LAZY = {
    "load_tiny": "world.tiny_models",
    "load_tiny_tokenizer": "world.tiny_models",
    "generate_problem": "world.arith_data",
    "generate_splits": "world.arith_data",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DataFormatError",
    "approx_kl",
    "as_r1_zero",
    "assistant_loss_mask",
    "chunked_response_log_probs",
    "compute_entropy",
    "continuous_batch_generate",
    "compute_gae",
    "compute_group_normalized_rewards",
    "compute_grpo_clip_loss",
    "compute_naive_policy_gradient_loss",
    "compute_per_instance_dpo_loss",
    "compute_policy_gradient_loss",
    "corrected_grpo_loss",
    "dpo_loss",
    "evaluate",
    "exact_kl",
    "extract_gsm8k_answer",
    "final_logits_softcap",
    "generate_problem",
    "generate_splits",
    "format_r1_zero_prompt",
    "get_response_log_probs",
    "grpo_microbatch_train_step",
    "grpo_train_step",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "gsm8k_to_r1_zero",
    "importance_weights",
    "load_gsm8k",
    "load_problems",
    "load_tiny",
    "load_tiny_tokenizer",
    "log_probs_from_logits",
    "masked_mean",
    "masked_normalize",
    "masked_whiten",
    "mismatch_report",
    "off_policy_pairs",
    "on_policy_pairs",
    "ppo_microbatch_train_step",
    "r1_zero_prompt_template",
    "r1_zero_reward_fn",
    "read_jsonl",
    "remove_empty_think",
    "render_conversation",
    "rollouts_from_completion",
    "sampler_log_probs",
    "sequence_log_probs",
    "sft_microbatch_train_step",
    "sft_train_step",
    "split_reasoning",
    "static_batch_generate",
    "thinking_flags",
    "thinking_format_reward",
    "token_level_rewards",
    "tokenize_prompt_and_output",
    "value_loss",
]
