"""Hidden cases of `sequence_log_probs(model, input_ids, labels, response_mask, average=False) -> (B,)`
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
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

GRADED = "sequence_log_probs"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_row_without_response_sum": "a row with no response token",
    "error_row_without_response_average": "a row with no response token",
    "error_mask_T_plus_1": "response_mask of another shape than labels",
    "error_mask_1d_broadcasts": "response_mask of another shape than labels (also one torch would broadcast)",
}


class TinyCausalLM(torch.nn.Module):
    """logits[b, t] = scale * head(tanh(mean of embeddings of tokens 0..t)), plus `spike` on the logit
    of token 0 wherever input_ids[b, t] == spike_id: causal, differentiable in embedding and head."""

    def __init__(self, embedding: torch.Tensor, head: torch.Tensor, scale: float, spike_id: int = -1,
                 spike: float = 0.0):
        super().__init__()
        self.embedding = torch.nn.Parameter(embedding.clone())
        self.head = torch.nn.Parameter(head.clone())
        self.scale, self.spike_id, self.spike = scale, spike_id, spike

    def forward(self, input_ids, **kwargs):
        h = self.embedding[input_ids]  # (B, T, H)
        steps = torch.arange(1, input_ids.shape[1] + 1, dtype=h.dtype).view(1, -1, 1)
        h = torch.tanh(h.cumsum(dim=1) / steps)
        logits = self.scale * h @ self.head.T  # (B, T, V)
        if self.spike:
            bump = torch.zeros(logits.shape[-1], dtype=logits.dtype)
            bump[0] = self.spike
            logits = logits + (input_ids == self.spike_id).to(logits.dtype)[..., None] * bump
        return SimpleNamespace(logits=logits)


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._response_mask_cases import MaskDraw

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


def call(fn, inputs: dict) -> dict:
    model = TinyCausalLM(inputs["embedding"], inputs["head"], inputs["scale"], inputs["spike_id"], inputs["spike"])
    args = (model, inputs["input_ids"].clone(), inputs["labels"].clone(), inputs["response_mask"].clone())
    kwargs = {} if inputs["average"] is None else {"average": inputs["average"]}
    if inputs["expect_error"]:
        try:
            fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - which exception is the output
            return {"raises": "ValueError" if isinstance(e, ValueError) else "other"}
        return {"raises": None}
    out = fn(*args, **kwargs)
    (out * inputs["weights"].to(out.dtype)).sum().backward()
    return {"sequence_log_probs": out, "grad_embedding": model.embedding.grad, "grad_head": model.head.grad}
