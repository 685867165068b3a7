"""Every realistic wrong version of a graded function of notebooks 01-05 loses its points.

Each mistake is a student's graded cell with one classic bug (written as in a notebook, so it is
pickled by value), judged like a submission: `autograder.judge.judge` runs it in a fresh,
sandboxed process where the references of its assignment are stubs, on the hidden cases (in
bulk: the functions of one suite in turn in one such process). A
graded cell earns its points only when its hidden check passes, so a mistake loses the points
exactly when the judge's report fails. Correct variants written differently from the reference
(`CORRECT`) must keep passing: the hidden cases test the contract, not one way of writing it.
Two mistakes also run end to end through `make grade` (`test_end_to_end`).
"""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cloudpickle
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def fn_from(source: str, name: str):
    namespace = {"__name__": "__main__"}
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), namespace)
    return namespace[name]


# ---------------------------------------------------------------- 01: extract_gsm8k_answer
EXTRACT = {
    "keeps_commas": """
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\\s*(.+?)\\s*$", answer_text, re.DOTALL)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).strip()
    """,
    "no_strip": """
        def extract_gsm8k_answer(answer_text):
            if "####" not in answer_text:
                raise ValueError("no answer")
            return answer_text.split("####")[-1].replace(",", "")
    """,
    "last_number_of_the_text": """
        import re
        def extract_gsm8k_answer(answer_text):
            numbers = re.findall(r"-?[\\d,]*\\.?\\d+", answer_text)
            if not numbers:
                raise ValueError("no answer")
            return numbers[-1].replace(",", "")
    """,
    "empty_string_instead_of_value_error": """
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\\s*(.+?)\\s*$", answer_text, re.DOTALL)
            return "" if m is None else m.group(1).strip().replace(",", "")
    """,
    "first_marker": """
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\\s*(.+?)\\s*$", answer_text, re.DOTALL)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).strip().replace(",", "")
    """,
    "digits_only": """
        import re
        def extract_gsm8k_answer(answer_text):
            m = re.search(r"####\\s*([\\d,]+)", answer_text)
            if m is None:
                raise ValueError("no answer")
            return m.group(1).replace(",", "")
    """,
}
EXTRACT_CORRECT = """
    def extract_gsm8k_answer(answer_text):
        head, sep, tail = answer_text.rpartition("####")
        if not sep:
            raise ValueError("no '#### N' in the text")
        return tail.strip().replace(",", "")
"""

# ---------------------------------------------------------------- 01: gsm8k_to_r1_zero
R1_BASE = """
    import re
    from course_lib.gsm8k import format_r1_zero_prompt, r1_zero_prompt_template
    def extract_gsm8k_answer(answer_text):
        m = re.search(r"####(?!.*####)\\s*(.+?)\\s*$", answer_text, re.DOTALL)
        if m is None:
            raise ValueError("no answer")
        return m.group(1).strip().replace(",", "")
    def gsm8k_to_r1_zero(example, template=None):
        text = example["answer"]
        cut = text.rfind("####")
        if cut < 0:
            raise ValueError("no answer")
        truth = extract_gsm8k_answer(text)
        reasoning = text[:cut].strip()
        QUESTION = example["question"]
        OUTPUT = f" {reasoning} </think> <answer> {truth} </answer>"
        return {"prompt": format_r1_zero_prompt(QUESTION, TEMPLATE), "output": OUTPUT, "ground_truth": TRUTH}
"""


def r1(question='example["question"]', output='f" {reasoning} </think> <answer> {truth} </answer>"', template="template",
       truth="truth", reasoning="text[:cut].strip()", check=True):
    src = R1_BASE.replace('QUESTION = example["question"]', f"QUESTION = {question}")
    src = src.replace('OUTPUT = f" {reasoning} </think> <answer> {truth} </answer>"', f"OUTPUT = {output}")
    src = src.replace("TEMPLATE)", f"{template})").replace("TRUTH}", f"{truth}}}")
    src = src.replace("reasoning = text[:cut].strip()", f"reasoning = {reasoning}")
    if not check:
        src = src.replace("""        if cut < 0:
            raise ValueError("no answer")
""", "").replace("""        if m is None:
            raise ValueError("no answer")
        return""", """        if m is None:
            return ""
        return""")
    return src


R1 = {
    "question_stripped": r1(question='example["question"].strip()'),
    "no_space_before_the_reasoning": r1(output='f"{reasoning} </think> <answer> {truth} </answer>"'),
    "hash_line_left_in_the_reasoning": r1(reasoning="text.strip()"),
    "template_ignored": r1(template="None"),
    "commas_in_the_ground_truth": r1(truth='text[cut + 4:].strip()'),
    "reasoning_not_stripped": r1(reasoning="text[:cut]"),
    "no_value_error": r1(check=False),
    "cut_at_the_first_marker": r1(reasoning='text[:text.find("####")].strip()'),
}

# ---------------------------------------------------------------- 01: tokenize_prompt_and_output
TOKENIZE_BASE = """
    import torch
    def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
        if len(prompt_strs) != len(output_strs):
            raise ValueError("lengths differ")
        if tokenizer.pad_token_id is None:
            raise ValueError("no pad token")
        P = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompt_strs]
        O = [tokenizer(o, add_special_tokens=False)["input_ids"] for o in output_strs]
        L = max(len(p) + len(o) for p, o in zip(P, O))
        full = torch.full((len(P), L), tokenizer.pad_token_id, dtype=torch.long)
        is_out = torch.zeros((len(P), L), dtype=torch.bool)
        for i, (p, o) in enumerate(zip(P, O)):
            full[i, :len(p) + len(o)] = torch.tensor(p + o, dtype=torch.long)
            is_out[i, len(p):len(p) + len(o)] = True
        return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": is_out[:, 1:]}
"""
TOKENIZE = {
    "special_tokens_added": TOKENIZE_BASE.replace(", add_special_tokens=False", ""),
    "prompt_and_output_tokenized_together": TOKENIZE_BASE.replace(
        'O = [tokenizer(o, add_special_tokens=False)["input_ids"] for o in output_strs]',
        'O = [tokenizer(p + o, add_special_tokens=False)["input_ids"][len(q):] for p, o, q in zip(prompt_strs, output_strs, P)]'),
    "padded_with_0": TOKENIZE_BASE.replace("tokenizer.pad_token_id, dtype", "0, dtype"),
    "mask_not_shifted": TOKENIZE_BASE.replace('"response_mask": is_out[:, 1:]', '"response_mask": is_out[:, :-1]'),
    "labels_not_shifted": TOKENIZE_BASE.replace('"labels": full[:, 1:]', '"labels": full[:, :-1]'),
    "mask_covers_padding": TOKENIZE_BASE.replace("is_out[i, len(p):len(p) + len(o)] = True", "is_out[i, len(p):] = True"),
    "mask_as_long": TOKENIZE_BASE.replace('"response_mask": is_out[:, 1:]', '"response_mask": is_out[:, 1:].long()'),
    "left_padding": TOKENIZE_BASE.replace(
        "full[i, :len(p) + len(o)] = torch.tensor(p + o, dtype=torch.long)\n            is_out[i, len(p):len(p) + len(o)] = True",
        "full[i, L - len(p) - len(o):] = torch.tensor(p + o, dtype=torch.long)\n            is_out[i, L - len(o):] = True"),
    "no_value_errors": TOKENIZE_BASE.replace("""        if len(prompt_strs) != len(output_strs):
            raise ValueError("lengths differ")
        if tokenizer.pad_token_id is None:
            raise ValueError("no pad token")
""", ""),
    "ids_as_int32": TOKENIZE_BASE.replace("tokenizer.pad_token_id, dtype=torch.long", "tokenizer.pad_token_id, dtype=torch.int32"),
}
TOKENIZE_CORRECT = """
    import torch
    from torch.nn.utils.rnn import pad_sequence
    def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
        if len(prompt_strs) != len(output_strs) or tokenizer.pad_token_id is None:
            raise ValueError("bad batch")
        enc = lambda texts: tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        rows, masks = [], []
        for p, o in zip(enc(prompt_strs), enc(output_strs)):
            rows.append(torch.tensor(p + o, dtype=torch.long))
            masks.append(torch.tensor([False] * len(p) + [True] * len(o)))
        full = pad_sequence(rows, batch_first=True, padding_value=tokenizer.pad_token_id)
        mask = pad_sequence(masks, batch_first=True, padding_value=False)
        return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": mask[:, 1:]}
"""

# ---------------------------------------------------------------- 02: compute_entropy
ENTROPY = {
    "log_of_softmax": """
        import torch
        def compute_entropy(logits):
            p = torch.softmax(logits.float(), dim=-1)
            return -(p * torch.log(p)).sum(-1)
    """,
    "log_of_softmax_plus_eps": """
        import torch
        def compute_entropy(logits):
            p = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(p * torch.log(p + 1e-8)).sum(-1)
    """,
    "logsumexp_minus_expected_logit": """
        import torch
        def compute_entropy(logits):
            z = logits.to(torch.promote_types(logits.dtype, torch.float32))
            return torch.logsumexp(z, -1) - (torch.softmax(z, -1) * z).sum(-1)
    """,
    "no_upcast_of_half_precision": """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits, dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
    "float64_cast_down_to_float32": """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.float(), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
    "log2_bits": """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1) / 0.6931471805599453
    """,
    "in_place_max_shift": """
        import torch
        def compute_entropy(logits):
            logits -= logits.max(dim=-1, keepdim=True).values
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
    "minus_sign_dropped": """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return (lp.exp() * lp).sum(-1)
    """,
}
ENTROPY_CORRECT = """
    import torch
    def compute_entropy(logits):
        p = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        return torch.special.entr(p).sum(dim=-1)
"""

# ---------------------------------------------------------------- 03: masked_normalize
MASKED = {
    "tensor_times_mask": """
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = tensor * mask
            return (kept.sum() if dim is None else kept.sum(dim=dim)) / normalize_constant
    """,
    "divides_by_the_token_count": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            if dim is None:
                return kept.sum() / mask.sum()
            return kept.sum(dim=dim) / mask.sum(dim=dim)
    """,
    "dim_none_sums_the_last_dim": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return kept.sum(dim=-1 if dim is None else dim) / normalize_constant
    """,
    "cast_to_float32": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor.float(), 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim)) / normalize_constant
    """,
    "bool_mask_assumed": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask, tensor, 0.0)
            return (kept.sum() if dim is None else kept.sum(dim=dim)) / normalize_constant
    """,
    "mean_instead_of_sum": """
        import torch
        def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
            kept = torch.where(mask.bool(), tensor, 0.0)
            return (kept.mean() if dim is None else kept.mean(dim=dim)) / normalize_constant
    """,
}
MASKED_CORRECT = """
    def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
        kept = tensor.masked_fill(~mask.bool().expand_as(tensor), 0)
        total = kept.sum() if dim is None else kept.sum(dim)
        return total / normalize_constant
"""

# ---------------------------------------------------------------- 03: log_probs_from_logits
LOGPROBS_BASE = """
    import torch
    CHUNK_ELEMENTS = 1 << 22
    def _row_chunks(n_rows, vocab):
        return max(1, CHUNK_ELEMENTS // max(vocab, 1))
    def _float(x):
        return x if x.dtype in (torch.float32, torch.float64) else x.float()
    class _SelectedLogProb(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            rows = _row_chunks(*logits.shape)
            lse = torch.cat([torch.logsumexp(_float(c), dim=-1) for c in logits.split(rows)])
            picked = _float(logits.gather(-1, labels[:, None]).squeeze(-1))
            ctx.save_for_backward(logits, labels, lse)
            return picked - lse
        @staticmethod
        def backward(ctx, grad_out):
            logits, labels, lse = ctx.saved_tensors
            rows = _row_chunks(*logits.shape)
            grad = torch.empty_like(logits)
            for start in range(0, logits.shape[0], rows):
                sl = slice(start, start + rows)
                g = grad_out[sl]
                chunk = -g[:, None] * torch.exp(_float(logits[sl]) - lse[sl, None])
                chunk.scatter_add_(-1, labels[sl, None], g[:, None].to(chunk.dtype))
                grad[sl] = chunk.to(grad.dtype)
            return grad, None
    def log_probs_from_logits(logits, labels):
        b, t, v = logits.shape
        return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
"""
LOGPROBS = {
    "log_softmax_then_gather": """
        import torch
        def log_probs_from_logits(logits, labels):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return lp.gather(-1, labels[..., None]).squeeze(-1)
    """,
    "double_shift": LOGPROBS_BASE.replace(
        "return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)",
        "return _SelectedLogProb.apply(logits[:, :-1].reshape(b * (t - 1), v), labels[:, 1:].reshape(-1)).view(b, t - 1)"),
    "no_upcast_of_half_precision": LOGPROBS_BASE.replace(
        "return x if x.dtype in (torch.float32, torch.float64) else x.float()", "return x"),
    "float64_cast_down": LOGPROBS_BASE.replace(
        "return x if x.dtype in (torch.float32, torch.float64) else x.float()", "return x.float()"),
    "last_partial_chunk_skipped": LOGPROBS_BASE.replace(
        "for start in range(0, logits.shape[0], rows):", "for start in range(0, logits.shape[0] - rows + 1, rows):"),
    "backward_ignores_grad_out": LOGPROBS_BASE.replace(
        "g = grad_out[sl]", "g = torch.ones_like(grad_out[sl])"),
    "logsumexp_added": LOGPROBS_BASE.replace("return picked - lse", "return picked + lse"),
    "softmax_kept_as_ctx_attribute": """
        import torch
        class _SelectedLogProb(torch.autograd.Function):
            @staticmethod
            def forward(ctx, logits, labels):
                log_p = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
                ctx.probs, ctx.labels, ctx.dtype = log_p.exp(), labels, logits.dtype
                return log_p.gather(-1, labels[:, None]).squeeze(-1)
            @staticmethod
            def backward(ctx, grad_out):
                grad = -grad_out[:, None] * ctx.probs
                grad.scatter_add_(-1, ctx.labels[:, None], grad_out[:, None].to(grad.dtype))
                return grad.to(ctx.dtype), None
        def log_probs_from_logits(logits, labels):
            b, t, v = logits.shape
            return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
    """,
    "softmax_saved_for_backward": """
        import torch
        class _SelectedLogProb(torch.autograd.Function):
            @staticmethod
            def forward(ctx, logits, labels):
                probs = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
                ctx.save_for_backward(probs, labels)
                return torch.log(probs.gather(-1, labels[:, None]).squeeze(-1))
            @staticmethod
            def backward(ctx, grad_out):
                probs, labels = ctx.saved_tensors
                grad = -grad_out[:, None] * probs
                grad.scatter_add_(-1, labels[:, None], grad_out[:, None].to(grad.dtype))
                return grad, None
        def log_probs_from_logits(logits, labels):
            b, t, v = logits.shape
            return _SelectedLogProb.apply(logits.reshape(b * t, v), labels.reshape(-1)).view(b, t)
    """,
}

# ---------------------------------------------------------------- 03: get_response_log_probs
GRLP_BASE = """
    import torch
    def log_probs_from_logits(logits, labels):
        lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        return lp.gather(-1, labels[..., None]).squeeze(-1)
    def entropy_from_logits(logits):
        with torch.no_grad():
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
        logits = model(input_ids).logits
        return {"log_probs": log_probs_from_logits(logits, labels),
                "token_entropy": entropy_from_logits(logits) if return_token_entropy else None}
"""
GRLP = {
    "shifted_again": GRLP_BASE.replace(
        '"log_probs": log_probs_from_logits(logits, labels)', '"log_probs": log_probs_from_logits(logits[:, :-1], labels[:, 1:])'),
    "entropy_with_a_graph": GRLP_BASE.replace("        with torch.no_grad():\n            lp", "        if True:\n            lp"),
    "entropy_even_when_not_asked": GRLP_BASE.replace(" if return_token_entropy else None", ""),
    "model_run_without_grad": GRLP_BASE.replace(
        "logits = model(input_ids).logits", "with torch.no_grad():\n            logits = model(input_ids).logits"),
    "always_float32": GRLP_BASE.replace("logits.to(torch.promote_types(logits.dtype, torch.float32))", "logits.float()"),
}

# ---------------------------------------------------------------- 04: sft_microbatch_train_step
MICRO_BASE = """
    import torch
    def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
        per_sequence = torch.where(response_mask.bool(), -policy_log_probs, 0.0).sum(dim=-1) / normalize_constant
        loss = per_sequence.mean() / gradient_accumulation_steps
        loss.backward()
        return loss.detach(), {"nll_per_sequence": per_sequence.detach()}
"""
MICRO = {
    "forgot_divide_by_k": MICRO_BASE.replace("per_sequence.mean() / gradient_accumulation_steps", "per_sequence.mean()"),
    "token_count_normaliser": MICRO_BASE.replace(
        ".sum(dim=-1) / normalize_constant", ".sum(dim=-1) / response_mask.sum()"),
    "loss_returned_as_float": MICRO_BASE.replace("return loss.detach(),", "return loss.item(),"),
    "input_grad_zeroed": MICRO_BASE.replace(
        "        loss.backward()\n",
        "        if policy_log_probs.grad is not None:\n            policy_log_probs.grad.zero_()\n        loss.backward()\n"),
    "input_grad_replaced": MICRO_BASE.replace(
        "        loss.backward()\n",
        "        (g,) = torch.autograd.grad(loss, policy_log_probs, retain_graph=True)\n"
        "        if policy_log_probs.is_leaf:\n            policy_log_probs.grad = g\n        else:\n            loss.backward()\n"),
    "mask_multiplied": MICRO_BASE.replace(
        "torch.where(response_mask.bool(), -policy_log_probs, 0.0)", "(-policy_log_probs * response_mask)"),
    "no_backward": MICRO_BASE.replace("        loss.backward()\n", ""),
    "unscaled_loss_returned": MICRO_BASE.replace("return loss.detach(),", "return (loss * gradient_accumulation_steps).detach(),"),
    "per_sequence_token_mean": MICRO_BASE.replace(
        ".sum(dim=-1) / normalize_constant", ".sum(dim=-1) / response_mask.sum(dim=-1).clamp(min=1)"),
}
MICRO_CORRECT = """
    import torch
    def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, normalize_constant=1.0):
        nll = -policy_log_probs.masked_fill(~response_mask.bool(), 0).sum(-1) / normalize_constant
        scaled = nll.sum() / (nll.shape[0] * gradient_accumulation_steps)
        scaled.backward()
        return scaled.detach(), {"nll_per_sequence": nll.detach(), "response_tokens": response_mask.sum()}
"""

# ---------------------------------------------------------------- 05: sft_train_step
STEP_BASE = """
    import torch
    def sft_train_step(model, tokenizer, optimizer, batch_examples, gradient_accumulation_steps, max_grad_norm=1.0,
                       scheduler=None, tokenize_fn=None, log_probs_fn=None, train_step_fn=None):
        k = gradient_accumulation_steps
        if len(batch_examples) % k != 0:
            raise ValueError("the batch does not split into k micro-batches")
        micro = len(batch_examples) // k
        total, tokens, nll = 0.0, 0, 0.0
        for j in range(k):
            chunk = batch_examples[j * micro:(j + 1) * micro]
            batch = tokenize_fn([e["prompt"] for e in chunk], [e["output"] for e in chunk], tokenizer)
            mask = batch["response_mask"]
            log_probs = log_probs_fn(model, batch["input_ids"], batch["labels"])["log_probs"]
            loss, _ = train_step_fn(log_probs, mask, k)
            total += float(loss)
            tokens += int(mask.sum())
            nll += float(torch.where(mask, -log_probs.detach(), 0.0).sum())
            #CLIP_IN_LOOP
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return {"loss": total, "grad_norm": grad_norm, "response_tokens": tokens, "nll_sum": nll}
"""
STEP = {
    "zero_grad_between_micro_batches": STEP_BASE.replace(
        "            batch = tokenize_fn(", "            optimizer.zero_grad(set_to_none=True)\n            batch = tokenize_fn("),
    "clip_inside_the_loop": STEP_BASE.replace(
        "#CLIP_IN_LOOP", "torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)"),
    "schedule_stepped_per_micro_batch": STEP_BASE.replace(
        "#CLIP_IN_LOOP", "if scheduler is not None:\n                scheduler.step()").replace(
        "        if scheduler is not None:\n            scheduler.step()\n        optimizer.zero_grad", "        optimizer.zero_grad"),
    "schedule_never_stepped": STEP_BASE.replace("        if scheduler is not None:\n            scheduler.step()\n", ""),
    "norm_after_clipping": STEP_BASE.replace(
        "grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n"
        "        grad_norm = float(torch.norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])))"),
    "loss_averaged_over_micro_batches": STEP_BASE.replace('"loss": total,', '"loss": total / k,'),
    "k_not_passed_to_the_loss": STEP_BASE.replace("train_step_fn(log_probs, mask, k)", "train_step_fn(log_probs, mask, 1)"),
    "passed_functions_ignored": STEP_BASE.replace(
        "    def sft_train_step(", "    import course_lib\n    def sft_train_step(").replace(
        "batch = tokenize_fn(", "batch = course_lib.tokenize_prompt_and_output(").replace(
        "log_probs_fn(model,", "course_lib.get_response_log_probs(model,").replace(
        "train_step_fn(log_probs,", "course_lib.sft_microbatch_train_step(log_probs,"),
    "gradients_zeroed_first_not_last": STEP_BASE.replace(
        "        micro = len(batch_examples) // k\n", "        micro = len(batch_examples) // k\n        optimizer.zero_grad()\n").replace(
        "        optimizer.zero_grad(set_to_none=True)\n        return", "        return"),
    "uneven_batch_silently_truncated": STEP_BASE.replace(
        "        if len(batch_examples) % k != 0:\n            raise ValueError(\"the batch does not split into k micro-batches\")\n", ""),
}

# ---------------------------------------------------------------- 05: evaluate
EVAL_BASE = """
    from course_lib.rewards import r1_zero_reward_fn
    def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
        if len(prompts) != len(ground_truths):
            raise ValueError("lengths differ")
        if not prompts:
            raise ValueError("no prompts")
        if sampling_params.n != 1:
            raise ValueError("one sample per prompt")
        rollouts = engine.generate(list(prompts), sampling_params)
        rewards = [reward_fn(r.text, gt) for r, gt in zip(rollouts, ground_truths)]
        categories = []
        for s in rewards:
            if s["format_reward"] == 0:
                categories.append("format_wrong")
            elif s["answer_reward"] == 0:
                categories.append("answer_wrong")
            else:
                categories.append("correct")
        counts = {c: categories.count(c) for c in ("format_wrong", "answer_wrong", "correct")}
        n = len(rewards)
        return {"rollouts": rollouts, "rewards": rewards, "categories": categories, "counts": counts,
                "format_reward": sum(s["format_reward"] for s in rewards) / n,
                "answer_reward": sum(s["answer_reward"] for s in rewards) / n,
                "reward": sum(s["reward"] for s in rewards) / n}
"""
EVALUATE = {
    "answer_checked_before_format": EVAL_BASE.replace(
        """            if s["format_reward"] == 0:
                categories.append("format_wrong")
            elif s["answer_reward"] == 0:
                categories.append("answer_wrong")
            else:
                categories.append("correct")""",
        """            if s["answer_reward"] == 1:
                categories.append("correct")
            elif s["format_reward"] == 0:
                categories.append("format_wrong")
            else:
                categories.append("answer_wrong")"""),
    "r1_zero_reward_hard_coded": EVAL_BASE.replace("rewards = [reward_fn(r.text, gt)", "rewards = [r1_zero_reward_fn(r.text, gt)"),
    "reward_arguments_swapped": EVAL_BASE.replace("reward_fn(r.text, gt)", "reward_fn(gt, r.text)"),
    "prompt_and_response_graded": EVAL_BASE.replace(
        "rewards = [reward_fn(r.text, gt) for r, gt in zip(rollouts, ground_truths)]",
        "rewards = [reward_fn(p + r.text, gt) for p, r, gt in zip(prompts, rollouts, ground_truths)]"),
    "counts_without_zeros": EVAL_BASE.replace(
        'counts = {c: categories.count(c) for c in ("format_wrong", "answer_wrong", "correct")}',
        "import collections\n        counts = dict(collections.Counter(categories))"),
    "answer_reward_over_well_formatted_only": EVAL_BASE.replace(
        '"answer_reward": sum(s["answer_reward"] for s in rewards) / n,',
        '"answer_reward": sum(s["answer_reward"] for s in rewards) / max(1, sum(s["format_reward"] for s in rewards)),'),
    "own_sampling_params": EVAL_BASE.replace(
        "rollouts = engine.generate(list(prompts), sampling_params)",
        "from course_lib.rollouts import SamplingParams\n"
        "        rollouts = engine.generate(list(prompts), SamplingParams(temperature=0.0, max_tokens=sampling_params.max_tokens))"),
    "zip_truncates_silently": EVAL_BASE.replace(
        '        if len(prompts) != len(ground_truths):\n            raise ValueError("lengths differ")\n', ""),
    "means_as_tensors": EVAL_BASE.replace(
        '"format_reward": sum(s["format_reward"] for s in rewards) / n,',
        '"format_reward": torch.tensor([s["format_reward"] for s in rewards]).mean(),').replace(
        "    from course_lib.rewards import r1_zero_reward_fn\n", "    import torch\n    from course_lib.rewards import r1_zero_reward_fn\n"),
    "duplicate_prompts_generated_once": EVAL_BASE.replace(
        "rollouts = engine.generate(list(prompts), sampling_params)",
        "unique = list(dict.fromkeys(prompts))\n"
        "        by_prompt = dict(zip(unique, engine.generate(unique, sampling_params)))\n"
        "        rollouts = [by_prompt[p] for p in prompts]"),
    "rollouts_replaced_by_texts": EVAL_BASE.replace('return {"rollouts": rollouts,', 'return {"rollouts": [r.text for r in rollouts],'),
}
EVALUATE_CORRECT = """
    from course_lib.rewards import r1_zero_reward_fn
    def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=r1_zero_reward_fn):
        if not prompts or len(prompts) != len(ground_truths) or sampling_params.n != 1:
            raise ValueError("bad arguments")
        out = {"rollouts": engine.generate(prompts, sampling_params), "rewards": [], "categories": [],
               "counts": dict.fromkeys(["format_wrong", "answer_wrong", "correct"], 0)}
        for rollout, truth in zip(out["rollouts"], ground_truths):
            score = reward_fn(rollout.text, truth)
            category = "format_wrong" if not score["format_reward"] else "answer_wrong" if not score["answer_reward"] else "correct"
            out["rewards"].append(score)
            out["categories"].append(category)
            out["counts"][category] += 1
        for key in ("format_reward", "answer_reward", "reward"):
            out[key] = float(sum(s[key] for s in out["rewards"]) / len(out["rewards"]))
        return out
"""

MISTAKES = (
    [("extract_gsm8k_answer", n, s) for n, s in EXTRACT.items()]
    + [("gsm8k_to_r1_zero", n, s) for n, s in R1.items()]
    + [("tokenize_prompt_and_output", n, s) for n, s in TOKENIZE.items()]
    + [("compute_entropy", n, s) for n, s in ENTROPY.items()]
    + [("masked_normalize", n, s) for n, s in MASKED.items()]
    + [("log_probs_from_logits", n, s) for n, s in LOGPROBS.items()]
    + [("get_response_log_probs", n, s) for n, s in GRLP.items()]
    + [("sft_microbatch_train_step", n, s) for n, s in MICRO.items()]
    + [("sft_train_step", n, s) for n, s in STEP.items()]
    + [("evaluate", n, s) for n, s in EVALUATE.items()]
)
CORRECT = [
    ("extract_gsm8k_answer", "rpartition", EXTRACT_CORRECT),
    ("gsm8k_to_r1_zero", "as_the_reference", r1()),
    ("tokenize_prompt_and_output", "pad_sequence", TOKENIZE_CORRECT),
    ("tokenize_prompt_and_output", "as_the_reference", TOKENIZE_BASE),
    ("compute_entropy", "softmax_entr", ENTROPY_CORRECT),
    ("masked_normalize", "masked_fill", MASKED_CORRECT),
    ("log_probs_from_logits", "as_the_reference", LOGPROBS_BASE),
    ("get_response_log_probs", "log_softmax_gather", GRLP_BASE),
    ("sft_microbatch_train_step", "masked_fill_sum", MICRO_CORRECT),
    ("sft_microbatch_train_step", "as_the_reference", MICRO_BASE),
    ("sft_train_step", "as_the_reference", STEP_BASE),
    ("evaluate", "one_loop", EVALUATE_CORRECT),
    ("evaluate", "as_the_reference", EVAL_BASE),
]


@pytest.fixture(scope="module")
def verdicts(hidden_cases):
    """The judge's report of every mistake and correct variant: per suite, all its functions in one
    fresh runner process (the judge's bulk mode), two suites at a time."""
    from autograder.judge import judge

    by_suite: dict[str, list] = {}
    for suite, name, source in MISTAKES + CORRECT:
        by_suite.setdefault(suite, []).append((name, cloudpickle.dumps(fn_from(source, suite_function(suite)))))

    def run(suite):
        names, fns = zip(*by_suite[suite])
        return {(suite, n): report for n, report in zip(names, judge(suite, list(fns)))}

    out = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for part in pool.map(run, by_suite):
            out.update(part)
    return out


def suite_function(suite: str) -> str:
    from autograder.engine import load_suite

    return load_suite(suite).GRADED


def test_every_graded_function_of_01_to_05_has_mistakes():
    from autograder.assignments import registry

    graded = {g.name for g in registry() if g.assignment <= "05" and not g.name.startswith("_")}
    assert graded <= {suite for suite, _, _ in MISTAKES}, graded - {suite for suite, _, _ in MISTAKES}
    assert len(MISTAKES) >= 60


@pytest.mark.slow
@pytest.mark.parametrize("suite,name", [(s, n) for s, n, _ in MISTAKES])
def test_mistake_loses_its_points(verdicts, suite, name):
    from autograder.judge import format_report

    report = verdicts[(suite, name)]
    assert not report["passed"], f"{suite}/{name} passed every hidden case:\n{format_report(report)}"
    assert report["cases"] and not report.get("problem"), format_report(report)  # it ran and was compared


@pytest.mark.slow
@pytest.mark.parametrize("suite,name", [(s, n) for s, n, _ in CORRECT])
def test_correct_variant_keeps_its_points(verdicts, suite, name):
    from autograder.judge import format_report

    report = verdicts[(suite, name)]
    assert report["passed"], f"{suite}/{name} is correct but failed:\n{format_report(report)}"


@pytest.mark.slow
def test_end_to_end(tmp_path, hidden_cases):
    """Two mistakes through `make grade` as whole notebooks (01 and 04, cut after their last graded
    cell): each loses exactly the points of its cell, while the solution keeps all of its own."""
    from autograder.grade import grade

    plan = {"01": ("solution_tokenize_prompt_and_output", TOKENIZE["special_tokens_added"], "test_tokenize_prompt_and_output"),
            "04": ("solution_sft_microbatch_train_step", MICRO["input_grad_zeroed"], "sft_microbatch_train_step")}
    for assignment, (solution_id, wrong, graded_cell) in plan.items():
        path = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
        nb = nbformat.read(path, as_version=4)
        last = max(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
        nb.cells = nb.cells[: last + 1]
        source, course = tmp_path / f"source{assignment}", tmp_path / f"course{assignment}"
        for folder in (source / assignment, course / "submitted" / "solution" / assignment):
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / path.name)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == solution_id:
                cell.source = textwrap.dedent(wrong)
        (course / "submitted" / "mistake" / assignment).mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / "mistake" / assignment / path.name)
        rows = {r["student"]: r for r in grade(assignment, course, jobs=2, timeout=600, source=source)}
        solution, mistake = rows["solution"], rows["mistake"]
        assert solution["status"] == "ok" and solution["score"] == solution["max_score"] > 0, solution
        key = f"{path.stem}:{graded_cell}"
        assert mistake["cells"][key] == 0 and solution["cells"][key] > 0, mistake
        assert mistake["score"] == solution["score"] - solution["cells"][key], mistake
