"""Recognition on mistakes it was not built from: the blind set (tests/blind_mistakes.py) never gets
a false name, on several draws in process and through the real judge on the hidden draw.

TRUE_NAMES says, for each blind entry, which names of its function's catalogue are true of it: the
catalogue's sentence states a fault the entry makes, on the cases that mistake fails. It was judged
by reading each entry's code and the catalogue side by side, after the entries were written; a
name outside it is a false name. `python benchmarks/recognition_rates.py --blind` measures
precision and recall on the set.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.blind_mistakes import BLIND

BLIND_DRAWS = 3  # draws of every suite's cases on which the test recognises each entry in process

# label -> the catalogue names true of it (judged, see the module docstring): a name is true when the
# fault its sentence states is one the entry makes (a missing check is true of an entry that does not
# check, whatever it does then; not of one that checks with the wrong exception)
TRUE_NAMES: dict[str, set[str]] = {
    "entropy_inplace_max_shift": {"in_place_max_shift"},
    "masked_normalize_multiplies_mask": {"tensor_times_mask"},
    "log_probs_softmax_in_input_dtype": {"no_upcast_of_half_precision", "log_softmax_then_gather"},
    "response_log_probs_shifted_twice": {"shifted_again"},
    "sft_micro_sums_over_batch": {"batch_sum_not_mean"},
    "sft_step_grad_norm_after_clip": {"norm_after_clipping"},
    "group_adv_biased_std": {"biased_std"},
    "group_adv_equal_rewards_residue": {"eps_added_but_nan_when_eps_is_0", "nan_for_group_size_1",
                                        "no_std_residue_on_constant_group"},
    "group_adv_strided_groups_no_check": {"groups_transposed"},
    "softcap_zero_cap_divides": {"softcap_cap_0_divides_by_zero"},
    "chunked_log_probs_misspelt_cap_key": {"chunked_misspelt_key", "chunked_cap_ignored"},
    "grpo_step_zero_grad_each_micro": {"zero_grad_between_micro_batches"},
    "naive_pg_advantages_broadcast_along_t": {"naive_vector_advantage_used_as_is"},
    "clip_loss_min_of_ratios": set(),  # pessimistic for A > 0, optimistic for A < 0: no catalogued sentence
    "clip_loss_inplace_clamp": set(),  # backward raises: nothing is detached
    "pg_dispatch_case_insensitive_no_none_check": {"missing_argument_not_checked"},
    "masked_mean_zero_for_empty_and_multiplies": {"masked_mean_zero_for_an_empty_row",
                                                  "masked_mean_multiplies_by_the_mask"},
    "grpo_micro_one_mean_over_tokens": {"step_token_level_mean"},
    "kl_k1_sign_flipped": {"sign_flipped"},
    "kl_k2_no_half_no_shape_check": {"half_dropped"},
    "kl_k3_exp_minus_one": {"exp_minus_one_in_float32"},
    "exact_kl_log_of_softmax": {"log_of_softmax"},
    "approx_kl_mean_of_row_means": {"mean_of_per_row_means", "nan_on_an_all_zero_mask"},
    "token_rewards_last_index_from_count": {"index_at_mask_sum_minus_1"},
    "gae_ignores_mask_in_recursion": {"recursion_over_every_column_masked_at_the_end", "bootstrap_from_the_pad"},
    "whiten_biased_var_no_min_count": {"biased_variance"},
    "value_loss_min_instead_of_max": {"min_instead_of_max"},
    "ppo_step_token_advantages_to_clip_loss": set(),  # raises on every case with T > 1
    "seq_log_probs_average_by_width_no_checks": {"mean_over_the_row_width", "empty_row_not_rejected",
                                                 "mask_shape_not_checked"},
    "dpo_log_of_sigmoid_assert_beta": {"log_of_sigmoid"},  # beta is checked, with the wrong exception
    "on_policy_pairs_repeats_counted": {"duplicates_not_removed"},
    "off_policy_first_answer_block_truncates_truth": {"first_block_changed", "float_ground_truth_accepted"},
    "remove_think_draws_only_for_blocks": {"draws_only_for_empty_blocks"},
    "thinking_flags_bernoulli_unchecked": {"ratio_not_checked"},
    "loss_mask_covers_prefill_unchecked": {"prefilled_think_counted_in_the_mask", "prefill_not_checked"},
    "continuous_admits_once_per_slot": {"slot_freed_at_prefill_left_empty_a_step"},
    "rollouts_drop_last_on_stop_unsorted": {"last_token_always_dropped", "listed_order"},
    "sampler_top_p_inclusive_cumsum": {"cumsum_includes_the_token"},
    "iw_sequence_mean_over_width": {"mean_over_the_width"},
    "corrected_loss_weights_from_policy": set(),  # weights from the policy, not the old log-probs
}


def names_on_draws(entries: list[dict], seeds) -> dict[str, list[tuple[int, bool, list[list[str]]]]]:
    """{label: [(seed, whether it fails a case, the names recognition gives it)]} for each entry
    (BLIND's shape), on each draw of its suite's cases: made in this process as grading makes them
    (`tests.helpers.named_draw`, shared with the suite's many-draws check), the entry run as the
    judge runs it (`autograder.signatures`). Each name given is a list: a mistake and its
    alternatives (`autograder.recognition.names`)."""
    from autograder.recognition import names as names_of
    from autograder.recognition import recognise
    from autograder.signatures import mistake_results, passed_cases
    from autograder.suite_api import load_suite, suite_settings
    from tests.helpers import named_draw

    by_suite = defaultdict(list)
    for entry in entries:
        by_suite[entry["function"]].append(entry)
    out = defaultdict(list)
    for suite, group in sorted(by_suite.items()):
        module = load_suite(suite)
        settings = suite_settings(module)
        for seed in seeds:
            cases, signatures, _ = named_draw(suite, seed)
            error_cases = [c["name"] for c in cases if c.get("error_case")]
            for entry in group:
                results = mistake_results(module, entry["source"], cases)
                passed = passed_cases(module, results, cases)
                names = [names_of(m) for m in recognise(results, signatures, settings, error_cases=error_cases,
                                                        passed=passed)] if len(passed) < len(cases) else []
                out[entry["label"]].append((seed, len(passed) < len(cases), names))
    return dict(out)


def false_names(label: str, given: list[list[str]]) -> list[list[str]]:
    """The names given to a blind entry that are false: a mistake whose alternatives are all untrue of it."""
    return [group for group in given if not set(group) & TRUE_NAMES[label]]


def test_every_blind_entry_has_its_true_names_judged():
    from autograder.mistakes import catalogue

    assert [e["label"] for e in BLIND] and sorted(TRUE_NAMES) == sorted(e["label"] for e in BLIND)
    for entry in BLIND:
        unknown = TRUE_NAMES[entry["label"]] - set(catalogue(entry["function"]))
        assert not unknown, f"{entry['label']}: {sorted(unknown)} are not names of {entry['function']}'s catalogue"


def by_suite() -> list:
    """pytest params, one per graded function of the blind set, each in its folder's xdist group:
    the draws and the judge's run its corpus tests make are shared (`tests.helpers`)."""
    return [pytest.param(suite, id=suite, marks=pytest.mark.xdist_group(suite))
            for suite in sorted({e["function"] for e in BLIND})]


@pytest.mark.slow
@pytest.mark.parametrize("suite", by_suite())
def test_no_false_name_on_the_blind_set_on_several_draws(suite):
    """Each blind entry of `suite` fails, and recognition gives it no name outside TRUE_NAMES, on
    BLIND_DRAWS draws of its suite's cases, in process. Prints what it named and the recall."""
    entries = [e for e in BLIND if e["function"] == suite]
    got = names_on_draws(entries, range(BLIND_DRAWS))
    problems = []
    for entry in entries:
        label = entry["label"]
        for seed, failed, given in got[label]:
            if not failed:
                problems.append(f"seed {seed}: {label} passes every case")
            problems += [f"seed {seed}: {label} is named {' or '.join(g)}, which is not true of it"
                         for g in false_names(label, given)]
        truth = TRUE_NAMES[label]
        recalled = bool(truth) and all(any(set(g) & truth for g in given) for _, _, given in got[label])
        print(f"{label}: {'a true name on every draw' if recalled else 'no true name on some draw'}; "
              f"named {[given for _, _, given in got[label]]}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("suite", by_suite())
def test_no_false_name_on_the_blind_set_through_the_judge(suite):
    """The same through the real judge, on the hidden draw (autograder/hidden/, made when missing),
    in the judge's run of the suite's corpus (`tests.helpers.judged_all`)."""
    from autograder.recognition import names
    from tests.helpers import judged_all

    reports = judged_all(suite)
    problems = []
    for entry in [e for e in BLIND if e["function"] == suite]:
        report = reports[f"blind:{entry['label']}"]
        if report["passed"]:
            problems.append(f"{entry['label']} passes every hidden case")
        given = [names(m) for m in report.get("mistakes", [])]
        problems += [f"{entry['label']} is named {' or '.join(g)}, which is not true of it"
                     for g in false_names(entry["label"], given)]
    assert not problems, "\n".join(problems)
