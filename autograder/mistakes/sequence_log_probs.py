"""The known mistakes of `sequence_log_probs` (notebook 12): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


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
