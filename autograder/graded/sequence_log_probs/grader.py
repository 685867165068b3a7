"""The grader's side of `sequence_log_probs` (notebook 12): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `sequence_log_probs(model, input_ids, labels, response_mask, average=False) -> (B,)`
(notebook 12): the sum over each row's response tokens of log pi(label_t | input_ids_<=t), the
mean over them when `average`.

The model is a small causal LM built here from the case's weights (embedding -> causal running
mean -> tanh -> output head), so the inputs are plain tensors; wherever its input token is
`spike_id`, `spike` is added to the logit of token 0, so every other label's log-prob there is
about -spike. Outputs: the (B,) sequence log-probs and the gradients of the model's parameters
through a weighted sum of them. Error cases must raise ValueError (or a subclass); their output is
{"raises": "ValueError"}, {"raises": "other"} (another exception) or {"raises": None}.

What the cases are built to catch:

- every case: a prompt before each response (label positions before it masked) and, in all but
  the longest row, padding after it: the mask ignored (the whole row summed), the mean where the
  sum is asked (average=False is the default: `*_sum_*` cases do not pass it, `explicit_average_false_*`
  passes it), the sum where the mean is asked (`*_average_*`), labels shifted a second time;
- `masked_garbage_1e4_*` (the prompt and padding positions' log-probs about -1e4): prompt tokens
  counted (the sequence up to the response's end summed), padding counted;
- `rows_of_very_different_lengths_*` (responses of 1 to 20 tokens): the mean over the batch's
  token count (one division by mask.sum()) or over the row's width T instead of each row's count;
- `float64_*`: float64 computed or returned in float32; `long_mask_*`, `float_mask_*`: `x[mask]`
  with a mask that is not bool (it indexes rows, or raises);
- `large_logits_scale_300_*` (log-probs down to about -1e3): log(softmax(...)) (-inf where a
  probability underflows);
- gradients of every case: the model run under no_grad, a detached output;
- `B1_*`, `T1_*`, `B1_T1_*`, `B8_T64_*`: shapes (a sum over the wrong dim);
- errors: a row with no response token (`error_row_without_response_*`: its mean would be 0 / 0,
  and an empty response has no log-prob to compare), a response_mask of another shape than the
  labels (`error_mask_T_plus_1`, and `error_mask_1d_broadcasts`, which torch broadcasts silently).

Every version brings its own per-token log-probs: in the judge the earlier notebooks' graded
functions may be stubs, so none of them is called here.
"""

from __future__ import annotations

import torch

from autograder.graded._response_mask_cases import MaskDraw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_row_without_response_sum": "a row with no response token",
    "error_row_without_response_average": "a row with no response token",
    "error_mask_T_plus_1": "response_mask of another shape than labels",
    "error_mask_1d_broadcasts": "response_mask of another shape than labels (also one torch would broadcast)",
}


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    def spans(T, starts, lengths):
        """A (B, T) bool mask: row i keeps label positions starts[i] .. starts[i] + lengths[i] - 1."""
        return MaskDraw.mask_of(T, list(zip(starts, lengths)))

    def responses(B, T):
        """A prompt then a response in every row; with B > 1 the last row runs to the end (no padding),
        the others stop earlier (padding after)."""
        starts = torch.randint(1 if T > 2 else 0, max(2, T // 3), (B,), generator=gen).clamp(max=T - 1).tolist()
        lengths = [int(torch.randint(1, max(2, T - s), (), generator=gen)) for s in starts]
        if B > 1:
            lengths[-1] = T - starts[-1]
        return spans(T, starts, lengths)

    def case(mask, V=13, H=8, scale=3.0, dtype=torch.float32, average=None, garbage=False, mask_kind="bool",
             expect_error=False, mask_override=None):
        B, T = mask.shape
        spike_id = V - 1
        ids = torch.randint(0, V - 1, (B, T), generator=gen)  # spike_id only where garbage is asked for
        labels = torch.randint(0, V, (B, T), generator=gen)
        if garbage:
            ids[~mask] = spike_id
            labels[~mask] = torch.randint(1, V, (int((~mask).sum()),), generator=gen)  # not token 0: about -spike
        m = {"bool": mask, "long": mask.long(), "float": mask.to(dtype)}[mask_kind]
        return {
            "embedding": torch.randn(V, H, generator=gen, dtype=torch.float64).to(dtype),
            "head": torch.randn(V, H, generator=gen, dtype=torch.float64).to(dtype),
            "scale": scale, "spike_id": spike_id, "spike": 1e4 if garbage else 0.0,
            "input_ids": ids, "labels": labels, "response_mask": m if mask_override is None else mask_override,
            "average": average, "weights": torch.randn(B, generator=gen, dtype=torch.float64).to(dtype),
            "expect_error": expect_error,
        }

    uneven = spans(24, [3, 2, 5, 4], [1, 20, 3, 12])  # very different lengths, padding after the short ones
    empty_row = responses(3, 8)
    empty_row[1] = False
    good = responses(3, 8)
    return [
        ("float32_sum_B3_T10", case(responses(3, 10))),
        ("float32_average_B3_T10", case(responses(3, 10), average=True)),
        ("explicit_average_false_B3_T9", case(responses(3, 9), average=False)),
        ("float64_sum_B3_T9", case(responses(3, 9), dtype=torch.float64)),
        ("float64_average_B4_T8", case(responses(4, 8), dtype=torch.float64, average=True)),
        ("masked_garbage_1e4_sum_B3_T12", case(responses(3, 12), garbage=True)),
        ("masked_garbage_1e4_average_B3_T12", case(responses(3, 12), garbage=True, average=True)),
        ("masked_garbage_1e4_float64_B2_T10", case(responses(2, 10), garbage=True, dtype=torch.float64)),
        ("rows_of_very_different_lengths_sum_B4_T24", case(uneven)),
        ("rows_of_very_different_lengths_average_B4_T24", case(uneven, average=True, garbage=True)),
        ("long_mask_sum_B3_T8", case(responses(3, 8), mask_kind="long")),
        ("float_mask_average_B3_T8", case(responses(3, 8), mask_kind="float", average=True)),
        ("large_logits_scale_300_B2_T6", case(responses(2, 6), V=17, scale=300.0)),
        ("B1_T7", case(responses(1, 7))),
        ("T1_B4", case(torch.ones(4, 1, dtype=torch.bool))),
        ("B1_T1_average", case(torch.ones(1, 1, dtype=torch.bool), average=True)),
        ("B8_T64_V50", case(responses(8, 64), V=50)),
        ("error_row_without_response_sum", case(empty_row, expect_error=True)),
        ("error_row_without_response_average", case(empty_row, average=True, expect_error=True)),
        ("error_mask_T_plus_1", case(good, expect_error=True,
                                     mask_override=torch.cat([good, torch.ones(3, 1, dtype=torch.bool)], dim=1))),
        ("error_mask_1d_broadcasts", case(good, expect_error=True, mask_override=good[0].clone())),
    ]


# ---------------------------------------------------------------- the correct versions
BASE = """
    import torch
    def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
        if response_mask.shape != labels.shape:
            raise ValueError("response_mask must have the shape of labels")
        keep = response_mask.bool()
        counts = keep.sum(dim=-1)
        if bool((counts == 0).any()):
            raise ValueError("response_mask has a row without a response token")
        logits = model(input_ids).logits
        lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        lp = lp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        total = torch.where(keep, lp, torch.zeros_like(lp)).sum(dim=-1)
        return total / counts if average else total
"""

SHAPE = """        if response_mask.shape != labels.shape:
            raise ValueError("response_mask must have the shape of labels")
"""

EMPTY = """        if bool((counts == 0).any()):
            raise ValueError("response_mask has a row without a response token")
"""

RET = "return total / counts if average else total"

TOTAL = "total = torch.where(keep, lp, torch.zeros_like(lp)).sum(dim=-1)"

LOGITS = "logits = model(input_ids).logits"

LSM = "lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)"

SUMS = ["float32_sum_B3_T10", "explicit_average_false_B3_T9", "float64_sum_B3_T9"]

AVERAGES = ["float32_average_B3_T10", "float64_average_B4_T8", "rows_of_very_different_lengths_average_B4_T24"]


CORRECT = {
    "log_softmax_gather_where": BASE,
    # per-token cross-entropy, the mask multiplied in (the masked log-probs are finite)
    "cross_entropy_times_mask": """
        import torch
        import torch.nn.functional as F
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if tuple(response_mask.shape) != tuple(labels.shape):
                raise ValueError(f"response_mask {tuple(response_mask.shape)} vs labels {tuple(labels.shape)}")
            logits = model(input_ids).logits
            z = logits.to(torch.promote_types(logits.dtype, torch.float32))
            nll = F.cross_entropy(z.reshape(-1, z.shape[-1]), labels.reshape(-1), reduction="none").view(labels.shape)
            m = response_mask.to(nll.dtype)
            n = m.sum(dim=1)
            if (n == 0).any():
                raise ValueError("empty response")
            total = -(nll * m).sum(dim=1)
            if average:
                return total / n
            return total
    """,
    # one row at a time, its response tokens selected, logit minus logsumexp
    "loop_over_rows_logsumexp": """
        import torch
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.dim() != labels.dim() or response_mask.shape != labels.shape:
                raise ValueError("response_mask and labels differ in shape")
            if not all(bool(row.any()) for row in response_mask.bool()):
                raise ValueError("a response is empty")
            logits = model(input_ids).logits
            if logits.dtype not in (torch.float32, torch.float64):
                logits = logits.float()
            rows = []
            for z, y, m in zip(logits, labels, response_mask.bool()):
                z, y = z[m], y[m]
                lp = z[torch.arange(len(y)), y] - torch.logsumexp(z, dim=-1)
                rows.append(lp.mean() if average else lp.sum())
            return torch.stack(rows)
    """,
    # float64 log-softmax, masked_fill, cast back to the output dtype
    "float64_inside_masked_fill": """
        import torch
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.shape != labels.shape:
                raise ValueError("bad response_mask shape")
            mask = response_mask != 0
            lengths = mask.sum(-1)
            if lengths.min() < 1:
                raise ValueError("row with no response token")
            logits = model(input_ids).logits
            out_dtype = torch.promote_types(logits.dtype, torch.float32)
            lp = torch.log_softmax(logits.double(), dim=-1).gather(2, labels[:, :, None])[:, :, 0]
            total = lp.masked_fill(~mask, 0.0).sum(-1)
            if average:
                total = total / lengths.double()
            return total.to(out_dtype)
    """,
    # notebook 03's released get_response_log_probs and 04's masked_normalize (open to notebook 12)
    "earlier_notebooks_functions": """
        import torch
        from course_lib import get_response_log_probs, masked_normalize
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.shape != labels.shape:
                raise ValueError("response_mask and labels must have one shape")
            counts = response_mask.sum(-1)
            if bool((counts == 0).any()):
                raise ValueError("a row has no response token")
            lp = get_response_log_probs(model, input_ids, labels)["log_probs"]
            total = masked_normalize(lp, response_mask.bool(), dim=-1)
            return total / counts.to(total.dtype) if average else total
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 10


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    "mean_where_the_sum_is_asked": Mistake(
        "averages over the response tokens even when average is False",
        edited(BASE, (RET, "return total / counts")),
        SUMS),
    "default_average_true": Mistake(
        "makes average=True the default instead of False",
        edited(BASE, ("average=False", "average=True")),
        ["float32_sum_B3_T10", "rows_of_very_different_lengths_sum_B4_T24"]),
    "average_ignored": Mistake(
        "returns the sum even when average is True",
        edited(BASE, (RET, "return total")),
        AVERAGES),
    # one division by the batch's response-token count
    "mean_over_the_batch_token_count": Mistake(
        "divides each row's sum by the batch's response-token count instead of the row's own",
        edited(BASE, (RET, "return total / keep.sum() if average else total")),
        AVERAGES),
    # the row's width, padding and prompt included, as the count
    "mean_over_the_row_width": Mistake(
        "divides by the row's width, prompt and padding included, instead of its response-token count",
        edited(BASE, (RET, "return total / keep.shape[-1] if average else total")),
        AVERAGES),
    "mask_ignored": Mistake(
        "sums every position instead of the response tokens only",
        edited(BASE, (TOTAL, "total = lp.sum(dim=-1)")),
        ["float32_sum_B3_T10", "masked_garbage_1e4_sum_B3_T12"]),
    # log pi(x, y): every position up to the response's end, the prompt's included
    "prompt_tokens_counted": Mistake(
        "counts every position up to the response's end, the prompt's included",
        edited(BASE, (TOTAL, "upto = keep.flip(-1).cummax(dim=-1).values.flip(-1)\n"
                                                       "        total = torch.where(upto, lp, torch.zeros_like(lp)).sum(dim=-1)")),
        ["masked_garbage_1e4_sum_B3_T12", "masked_garbage_1e4_float64_B2_T10"]),
    # every position from the response's start on: the padding after it counted
    "padding_counted": Mistake(
        "counts every position from the response's start on, the padding after it included",
        edited(BASE, (TOTAL, "after = keep.cummax(dim=-1).values\n"
                                                 "        total = torch.where(after, lp, torch.zeros_like(lp)).sum(dim=-1)")),
        ["masked_garbage_1e4_sum_B3_T12", "rows_of_very_different_lengths_sum_B4_T24"]),
    # tokenize_prompt_and_output has shifted the labels already
    "labels_shifted_again": Mistake(
        "shifts logits and labels by one again, though the labels are already shifted",
        edited(BASE, ("lp = lp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)",
                                               "lp = lp[:, :-1].gather(-1, labels[:, 1:].unsqueeze(-1)).squeeze(-1)\n"
                                               "        lp = torch.cat([lp, torch.zeros_like(lp[:, :1])], dim=1)")),
        ["float32_sum_B3_T10", "B8_T64_V50"]),
    # no gradient reaches the model: DPO would train nothing
    "model_run_without_grad": Mistake(
        "runs the model under no_grad, so no gradient reaches it",
        edited(BASE, (LOGITS, "with torch.no_grad():\n            " + LOGITS)),
        ["float32_sum_B3_T10", "float64_sum_B3_T9"],
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
    "always_float32": Mistake(
        "computes in float32 always: a float64 model's log-probs must stay float64",
        edited(BASE, (LSM, "lp = torch.log_softmax(logits.float(), dim=-1)")),
        ["float64_sum_B3_T9", "float64_average_B4_T8"]),
    # log(softmax) is -inf where a probability underflows in float32
    "log_of_softmax": Mistake(
        "takes log(softmax(logits)), which is -inf where a probability underflows, instead of log_softmax",
        edited(BASE, (LSM, "lp = torch.log(torch.softmax(logits.to(torch.promote_types(logits.dtype, "
                                              "torch.float32)), dim=-1))")),
        ["large_logits_scale_300_B2_T6"]),
    # an empty row sums to 0 (its mean to nan) instead of raising
    "empty_row_not_rejected": Mistake(
        "accepts a row without response tokens instead of raising ValueError",
        edited(BASE, (EMPTY, "")),
        ["error_row_without_response_sum", "error_row_without_response_average"]),
    # a (T,) mask broadcasts over the rows, a (B, T+1) one raises a RuntimeError
    "mask_shape_not_checked": Mistake(
        "accepts a mask of another shape than labels instead of raising ValueError",
        edited(BASE, (SHAPE, "")),
        ["error_mask_T_plus_1", "error_mask_1d_broadcasts"]),
    # x[mask] with a long mask indexes rows; with a float mask it raises
    "indexes_with_the_mask_as_given": Mistake(
        "indexes with the mask as given: a long mask indexes rows, a float mask raises",
        """
        import torch
        def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
            if response_mask.shape != labels.shape or not response_mask.bool().any(-1).all():
                raise ValueError("bad response_mask")
            logits = model(input_ids).logits
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            lp = lp.gather(-1, labels[..., None])[..., 0]
            rows = [row[m] for row, m in zip(lp, response_mask)]
            return torch.stack([r.mean() if average else r.sum() for r in rows])
    """,
        ["long_mask_sum_B3_T8", "float_mask_average_B3_T8"]),
}
