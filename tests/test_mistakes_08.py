"""Notebook 08: realistic wrong versions of the graded functions each lose points; the fixed
chunked path agrees with the model's own forward on the two real tiny models.

Every wrong version is the course_lib reference with one realistic edit (the cap applied twice,
read under the misspelt key, taken from a constant, ...), defined as a student's notebook defines
it (module `__main__`, so it is sent to the judge by value) and graded by the real judge,
`autograder.checker.check_hidden`, which runs it in a fresh process on the hidden cases. Each test
asserts that the check fails and names the case built to catch the mistake. Unedited copies of the
references pass, so the failures come from the edits and not from the copying.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import course_lib.softcap as softcap

HEADER = "import torch\n\n"
# what a student's notebook 08 defines: the cap, then the chunked path that calls it
NB08 = HEADER + "\n\n".join(inspect.getsource(f) for f in (softcap.final_logits_softcap, softcap.chunked_response_log_probs))
GRADED = ["final_logits_softcap", "chunked_response_log_probs"]


def student_function(source: str, name: str):
    """`name` from `source` run as a notebook runs it (module __main__: cloudpickle sends it by value)."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, "<notebook>", "exec"), namespace)
    return namespace[name]


def edited(source: str, old: str, new: str) -> str:
    """`source` with the one occurrence of `old` replaced (the test breaks loudly if the reference changed)."""
    assert source.count(old) == 1, f"expected exactly one {old!r} in the reference source"
    return source.replace(old, new)


CAP_LINE = "    return cap * torch.tanh(logits / cap)\n"
NONE_CHECK = "    if not cap:"
CAP_READ = 'cap = getattr(model.config, "final_logit_softcapping", None)'
CAP_CALL = "logits = final_logits_softcap(head(flat_hidden[rows]), cap)"
HIDDEN = "hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state"
HEAD = "head = model.get_output_embeddings()"

# (test id, graded function, [(old, new), ...] edits of the reference, the cases that must fail)
MISTAKES = [
    # ---------------------------------------------------------------- final_logits_softcap
    ("softcap_applied_twice", "final_logits_softcap",
     [(CAP_LINE, "    once = cap * torch.tanh(logits / cap)\n    return cap * torch.tanh(once / cap)\n")],
     ["beyond_cap_float32_2x3x11_cap30"]),
    ("softcap_as_logits_times_tanh", "final_logits_softcap",
     [(CAP_LINE, "    return logits * torch.tanh(logits / cap)\n")],
     ["beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]),
    ("softcap_not_scaled_back_by_the_cap", "final_logits_softcap",
     [(CAP_LINE, "    return torch.tanh(logits / cap)\n")],
     ["beyond_cap_float32_2x3x11_cap30"]),
    ("softcap_cap_0_divides_by_zero", "final_logits_softcap",
     [(NONE_CHECK, "    if cap is None:")],
     ["cap_0_2x8_unchanged", "cap_0.0_with_zero_logits_unchanged"]),
    ("softcap_cap_None_not_handled", "final_logits_softcap",
     [(NONE_CHECK, "    if cap == 0:")],
     ["cap_None_2x3x11_unchanged", "cap_None_float64_4x6_unchanged"]),
    ("softcap_in_place_on_the_callers_logits", "final_logits_softcap",
     [(CAP_LINE, "    return logits.div_(cap).tanh_().mul_(cap)\n")],
     ["no_grad_input_3x5_cap30"]),
    # ---------------------------------------------------------------- chunked_response_log_probs
    ("chunked_cap_ignored", "chunked_response_log_probs",
     [(CAP_CALL, "logits = head(flat_hidden[rows])")],
     ["capped_cap30_remainder_B2_T7_chunk3", "capped_cap5_chunk_of_1_row_B2_T6"]),
    ("chunked_misspelt_key", "chunked_response_log_probs",
     [(CAP_READ, 'cap = getattr(model.config, "final_logits_softcapping", None)')],
     ["capped_cap30_padded_labels_B3_T9", "misspelt_key_present_caps_nothing_B2_T6"]),
    ("chunked_cap_from_a_constant", "chunked_response_log_probs",
     [(CAP_READ, "cap = 30.0")],
     ["capped_cap5_chunk_of_1_row_B2_T6", "uncapped_cap_None_B2_T6", "qwen2_no_softcap_field_B2_T7"]),
    ("chunked_cap_read_without_a_default", "chunked_response_log_probs",
     [(CAP_READ, "cap = model.config.final_logit_softcapping")],
     ["qwen2_no_softcap_field_B2_T7", "qwen2_untied_no_softcap_field_B2_T5"]),
    ("chunked_cap_applied_twice_over_the_models_logits", "chunked_response_log_probs",
     [(HIDDEN, "hidden = model(input_ids).logits  # (B, T, V), capped by the forward"),
      (HEAD, "head = torch.nn.Identity()")],
     ["capped_cap30_remainder_B2_T7_chunk3", "capped_cap5_chunk_of_1_row_B2_T6"]),
    ("chunked_inline_cap_divides_by_None", "chunked_response_log_probs",
     [(CAP_CALL, "logits = head(flat_hidden[rows])\n        logits = cap * torch.tanh(logits / cap)")],
     ["uncapped_cap_None_B2_T6", "qwen2_no_softcap_field_B2_T7"]),
    ("chunked_inline_cap_divides_by_zero", "chunked_response_log_probs",
     [(CAP_CALL, "logits = head(flat_hidden[rows])\n        if cap is not None:\n"
                 "            logits = cap * torch.tanh(logits / cap)")],
     ["uncapped_cap_0_B2_T6"]),
    ("chunked_labels_shifted_again", "chunked_response_log_probs",
     [(HIDDEN, HIDDEN + "\n    hidden, labels = hidden[:, :-1], labels[:, 1:]  # next-token alignment (again)")],
     ["capped_cap30_remainder_B2_T7_chunk3", "qwen2_no_softcap_field_B2_T7"]),
    ("chunked_last_partial_chunk_dropped", "chunked_response_log_probs",
     [("range(0, flat_hidden.shape[0], chunk_size)", "range(0, flat_hidden.shape[0] - chunk_size + 1, chunk_size)")],
     ["capped_cap30_remainder_B2_T7_chunk3", "capped_cap30_chunk_larger_than_BT_B3_T5"]),
    ("chunked_input_embeddings_as_output_layer", "chunked_response_log_probs",
     [(HEAD, "head = lambda h: h @ model.get_input_embeddings().weight.T  # tied, isn't it?")],
     ["capped_cap20_untied_several_chunks_B2_T17_V300", "qwen2_untied_no_softcap_field_B2_T5"]),
    ("chunked_always_float32", "chunked_response_log_probs",
     [("logits.to(torch.promote_types(logits.dtype, torch.float32))", "logits.float()")],
     ["float64_capped_cap7.5_B2_T6_chunk4"]),
    ("chunked_without_a_graph", "chunked_response_log_probs",
     [(HIDDEN, "with torch.no_grad():  # scoring only, isn't it?\n        " + HIDDEN)],
     ["capped_cap30_remainder_B2_T7_chunk3", "qwen2_no_softcap_field_B2_T7"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("mistake, graded, edits, failing_cases", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_realistic_mistake_loses_the_hidden_check(mistake, graded, edits, failing_cases, hidden_cases):
    from autograder.checker import HiddenCheckFailed, check_hidden

    source = NB08
    for old, new in edits:
        source = edited(source, old, new)
    with pytest.raises(HiddenCheckFailed) as failed:
        check_hidden(graded, student_function(source, graded))
    report = str(failed.value)
    print(report)
    for case in failing_cases:
        assert f"FAIL {case}:" in report, f"{mistake}: the case {case} should catch it:\n{report}"


@pytest.mark.slow
@pytest.mark.parametrize("graded", GRADED)
def test_copies_of_the_references_pass(graded, hidden_cases):
    from autograder.checker import check_hidden

    check_hidden(graded, student_function(NB08, graded))


# ---------------------------------------------------------------- parity on the real tiny models
@pytest.fixture(scope="module")
def batch():
    from course_lib import gsm8k_to_r1_zero, load_problems, load_tiny_tokenizer, tokenize_prompt_and_output

    examples = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:3]]
    tok = load_tiny_tokenizer()
    return tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tok)


@pytest.mark.parametrize("name, capped", [("gemma2-softcap", True), ("qwen2-base", False)])
def test_chunked_path_matches_the_models_own_forward(name, capped, batch):
    """The fixed path equals `get_response_log_probs` (the model's forward, which caps) within 1e-5
    on the response tokens, for every chunk size, and the path without the cap is far off exactly
    when the model caps. (Over all positions the float32 rounding of log-probs near -40 reaches
    1.1e-5 with one-row chunks, measured: hence a relative term there.)"""
    from course_lib import chunked_response_log_probs, get_response_log_probs, load_tiny

    torch.manual_seed(0)
    model, _ = load_tiny(name)
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["response_mask"].bool()
    with torch.no_grad():
        forward = get_response_log_probs(model, ids, labels)["log_probs"]
        for chunk in (1, 7, 64, ids.numel() + 5):
            chunked = chunked_response_log_probs(model, ids, labels, chunk_size=chunk)
            assert chunked.shape == labels.shape and chunked.dtype == torch.float32
            gap = (chunked - forward)[mask].abs().max().item()
            assert gap < 1e-5, f"{name}, chunk {chunk}: gap {gap:.2e} against the model's own forward"
            torch.testing.assert_close(chunked, forward, atol=1e-5, rtol=1e-6)
        raw = model.get_output_embeddings()(model.get_decoder()(input_ids=ids).last_hidden_state)
        uncapped = torch.log_softmax(raw, -1).gather(-1, labels[..., None]).squeeze(-1)
    missing_cap_gap = (uncapped - forward)[mask].abs().mean().item()
    if capped:
        assert missing_cap_gap > 0.5, f"without the cap the response log-probs move by only {missing_cap_gap:.3f} nat"
    else:
        assert missing_cap_gap < 1e-5, f"{name} has no cap, yet the raw path differs by {missing_cap_gap:.2e}"


def test_chunked_path_applies_the_output_layer_a_block_at_a_time(batch):
    """No (B, T, V) logits: the output layer never sees more than `chunk_size` rows at once."""
    from course_lib import chunked_response_log_probs, load_tiny

    model, _ = load_tiny("gemma2-softcap")
    rows = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, args, out: rows.append(out.shape))
    try:
        with torch.no_grad():
            chunked_response_log_probs(model, batch["input_ids"], batch["labels"], chunk_size=16)
    finally:
        hook.remove()
    n = batch["input_ids"].numel()
    assert [r[0] for r in rows] == [16] * (n // 16) + ([n % 16] if n % 16 else []), rows
    assert all(len(r) == 2 for r in rows), "the output layer saw a (B, T, H) tensor"
