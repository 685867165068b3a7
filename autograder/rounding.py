"""The rounding bound of a case: how far any correct computation of it may land from the truth.

A correct float32 function may sum in another order than the reference: a loop over sequences,
a weighted sum, float64 inside. A sum of n terms computed in any order errs by at most

    (n - 1) u sum |x_i|                      (any order; u = eps / 2, the unit roundoff)

(Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 4.4): each of its n - 1
additions rounds by at most u times a partial sum, at most u sum |x_i|. So an output needs the
magnitude of the terms summed to make it, not only its own: a loss that cancels to near 0 among
terms of size 1 keeps the rounding of size 1. Treating each rounding as an independent error of
mean zero and at most its bound b_i, Hoeffding's inequality bounds their first-order effect on an
output by

    lambda sqrt(sum_i (c_i b_i)^2)           with probability at least 1 - 2 exp(-lambda^2 / 2)

where c_i is the output's sensitivity to the i-th rounding (Higham and Mary, "A New Approach to
Probabilistic Rounding Error Analysis", SIAM J. Sci. Comput. 41(5), 2019). For one sum that is
lambda sqrt(n) u sum |x_i|, which is at least the worst case (n - 1) u sum |x_i| up to n = 65
(lambda = 8: the loops a student writes) and grows like sqrt(n) beyond (a vocabulary's
logsumexp). With lambda = LAMBDA = 8, 2 exp(-32) = 2.5e-14 per output value.

`bound_run` runs a case's reference once more in float64 under `RoundingBound`, a
`TorchDispatchMode` that carries, beside every floating tensor, a shadow tensor of the same shape:
sum_i (c_i b_i)^2 of that value, in units of eps^2 (its bound is LAMBDA eps sqrt(shadow)).
Inputs are exact (shadow 0); every aten operation sets its outputs' shadows from its inputs':

- a sum (`sum`, `mean`, `mm`, `bmm`, `dot`, `cumsum`, `scatter_add`, `index_put` that
  accumulates, ...), multilinear in its floating inputs f(x_1, ..., x_k): each input's shadow
  carried through the squares of the others, sum_j f(x_1^2, .., s_j, .., x_k^2) (a linear
  operation's coefficients squared), plus its own roundings, `summation_variance(n)`
  f(|x_1|, ..., |x_k|)^2 = n / 4 (sum |terms|)^2, where n counts the terms of each output (0
  when every term and partial sum lies on a grid the precision holds exactly: counts, sums of
  masks);
- a pointwise operation (torch's `pointwise` tag): + - * / carry their inputs' shadows by their
  derivatives squared; any other, each input's shadow s by the square of its secant over the
  input's deviation sqrt(s), (f(x + eps32 sqrt(s)) - f(x)) / eps32 (the other side where the first
  leaves the domain); plus its own rounding, the result squared (torch's float32 math functions
  are within one unit in the last place) unless the result is exactly representable (then a
  correctly rounded operation makes it exactly); a step (`floor`, `sign`, ...) carries nothing: a
  draw that puts its input at a step is a near-tie of the reference's own rounding
  (`autograder.compare`);
- an operation that moves or selects values (`cat`, `index`, `gather`, `where`'s branches, a
  view, `sort`'s values, ...) moves or selects the shadows with them; the largest value of a set
  (`amax`) takes the largest shadow of the set; a random draw or a constant is exact;
- any other operation runs its decomposition into these (`torch._decomp`: softmax, logsumexp,
  norms, variances, losses, attention), inside the mode; one with none is refused by name.

Shadows are kept per storage, so views, in-place operations and gradients accumulated into
`.grad` share their bounds as they share their values. Scaled by the case precision's eps (a
correct function of a float32 case computes in float32 at least; one of a float64 case, in
float64), the shadow of an output is the bound its tolerance adds (`autograder.compare`).
"""

from __future__ import annotations

import math
import weakref

import torch
from torch._decomp import decomposition_table
from torch.utils._python_dispatch import TorchDispatchMode

LAMBDA = 8.0  # the bound fails with probability at most 2 exp(-LAMBDA^2 / 2) = 2.5e-14 per value (docstring)
STEP = torch.finfo(torch.float32).eps  # the secant's step: eps32 times the input's shadow

aten = torch.ops.aten

# sums, linear in their floating inputs together; n = f(1, ..., 1) terms per output
SUMS = {aten.sum.default, aten.sum.dim_IntList, aten.cumsum.default, aten.cumsum_.default, aten.scatter_add.default,
        aten.scatter_add_.default, aten.index_add.default, aten.index_add_.default,
        aten._unsafe_masked_index_put_accumulate.default}
PRODUCTS = {aten.mm.default, aten.bmm.default, aten.dot.default, aten.mv.default}  # sums of products: multilinear
MEANS = {aten.mean.default, aten.mean.dim}  # a sum divided by the count of its terms
PUTS = {aten.index_put.default, aten.index_put_.default, aten._unsafe_index_put.default}  # a sum when accumulating
# moves: each output value is one input value or a constant (float arguments are constants)
MOVES = {aten._to_copy.default, aten.clone.default, aten.copy.default, aten.copy_.default, aten.cat.default,
         aten.stack.default, aten.flip.default, aten.roll.default, aten.repeat.default, aten.index.Tensor,
         aten.index_select.default, aten.gather.default, aten.embedding.default, aten.select_backward.default,
         aten.slice_backward.default, aten.scatter.src, aten.scatter.value, aten.scatter_.src,
         aten.scatter_.value, aten.masked_fill.Scalar, aten.masked_fill_.Scalar, aten.masked_fill.Tensor,
         aten.masked_fill_.Tensor, aten.masked_select.default, aten.masked_scatter.default,
         aten.constant_pad_nd.default, aten.tril.default, aten.triu.default, aten._unsafe_view.default,
         aten.fill.Scalar, aten.fill_.Scalar, aten.fill.Tensor, aten.fill_.Tensor, aten.zero.default,
         aten.zero_.default, aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther,
         aten._unsafe_masked_index.default, aten.diag_embed.default, aten.unfold_backward.default,
         aten.expand_copy.default, aten.lift_fresh_copy.default}
# selections: each output value is one of the inputs' values at its position, or a constant
SELECTIONS = {aten.abs.default, aten.abs_.default, aten.neg.default, aten.neg_.default, aten.relu.default,
              aten.relu_.default, aten.clamp.default, aten.clamp_.default, aten.clamp.Tensor, aten.clamp_.Tensor,
              aten.clamp_min.default, aten.clamp_min_.default, aten.clamp_max.default, aten.clamp_max_.default,
              aten.maximum.default, aten.minimum.default, aten.fmax.default, aten.fmin.default}
ORDERED = {aten.sort.default, aten.sort.stable, aten.topk.default, aten.max.dim, aten.min.dim,
           aten.kthvalue.default, aten.cummax.default, aten.cummin.default}  # (values, indices)
EXTREMES = {aten.amax.default, aten.amin.default, aten.max.default, aten.min.default}
STEPS = {aten.floor.default, aten.ceil.default, aten.round.default, aten.trunc.default, aten.sign.default,
         aten.floor_.default, aten.ceil_.default, aten.round_.default, aten.trunc_.default, aten.sign_.default,
         aten.round.decimals, aten.heaviside.default}
UNBOUNDED = {aten.set_.source_Storage, aten.set_.source_Storage_storage_offset, aten.set_.source_Tensor,
             aten.resize_.default}  # shadows follow storages
PRECISIONS = {24: torch.float32, 53: torch.float64}


def summation_variance(n):
    """The own rounding of a sum of n terms (or of n products), in any order, as the sum of the
    squares of its roundings' bounds per unit of (eps sum |x_i|)^2: each of its at most n
    roundings (the n - 1 partial sums, the products) is at most u = eps / 2 times sum |x_i|, so
    n / 4. `n`: a number or a tensor of them."""
    return n / 4


def _floating(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _leaves(args, kwargs):
    """The arguments of an aten operation, with lists of them opened (one level: all aten has)."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def _map(fn, args, kwargs):
    def one(a):
        return type(a)(fn(x) for x in a) if isinstance(a, (list, tuple)) else fn(a)

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def _grain(x: torch.Tensor, bits: int) -> float | None:
    """The largest power of two every value of `x` is a multiple of, when every value is finite
    and has at most `bits` significant bits (else None); inf when every value is 0."""
    x = x[x != 0].to(torch.float64)
    if not bool(torch.isfinite(x).all()):
        return None
    if x.numel() == 0:
        return math.inf
    mantissa, exponent = torch.frexp(x)
    whole = (mantissa * 2.0**53).to(torch.int64)  # exact: |mantissa| in [0.5, 1)
    low = whole & -whole  # its lowest set bit
    if bool((whole.abs() // low >= 2**bits).any()):
        return None
    return float(torch.ldexp(low.to(torch.float64), exponent.to(torch.int64) - 53).min())


class _Kind:
    """What the mode does with one aten operation (worked out once per operation: `_kind`)."""

    def __init__(self, func):
        self.passthrough = func.is_view or torch.Tag.inplace_view in func.tags or func.namespace != "aten" \
            or func in UNBOUNDED
        self.composite = not self.passthrough and func is not aten._local_scalar_dense.default and \
            torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
        self.written = [(i, a.name) for i, a in enumerate(func._schema.arguments)
                        if a.alias_info is not None and a.alias_info.is_write]
        self.random = torch.Tag.nondeterministic_seeded in func.tags
        name = func.overloadpacket.__name__
        self.constant = name.endswith("_like") or name.startswith("new_") or func in STEPS
        self.foreach = name.startswith("_foreach_")
        self.pointwise = torch.Tag.pointwise in func.tags

    def written_tensors(self, args, kwargs) -> list[torch.Tensor]:
        found = []
        for i, name in self.written:
            value = kwargs[name] if name in kwargs else (args[i] if i < len(args) else None)
            found += [v for v in (value if isinstance(value, (list, tuple)) else [value]) if _floating(v)]
        return found


_KINDS: dict = {}


def _kind(func) -> _Kind:
    kind = _KINDS.get(func)
    if kind is None:
        kind = _KINDS[func] = _Kind(func)
    return kind


class RoundingBound(TorchDispatchMode):
    """Within: every floating tensor an aten operation makes carries a shadow (the module
    docstring); `bound(t)` reads it, in units of eps, and `scalar_bounds` those of the Python
    numbers read out of tensors (`.item()`), by value. `bits`: the significand of the precision a
    correct computation works in (24 for float32, 53 for float64)."""

    def __init__(self, bits: int = 24):
        super().__init__()
        self.bits = bits
        self.shadows: dict[int, tuple] = {}  # id(storage) -> (weak reference to it, its elements' shadows, flat)
        self.scalar_bounds: dict[float, float] = {}

    # ------------------------------------------------------------ shadows, per storage
    def shadow(self, t: torch.Tensor) -> torch.Tensor | None:
        """The shadow of `t` (float64, t's shape), or None where none was made: an exact value."""
        storage = t.untyped_storage()
        entry = self.shadows.get(id(storage))
        if entry is None or entry[0]() is not storage or entry[1].numel() * t.element_size() != storage.nbytes():
            return None
        return entry[1].as_strided(t.shape, t.stride(), t.storage_offset())

    def _new_shadow(self, t: torch.Tensor) -> torch.Tensor:
        """A zero shadow for the whole storage of `t` (kept while the storage lives), as t's view."""
        storage, key = t.untyped_storage(), id(t.untyped_storage())
        shadows = self.shadows
        self.shadows[key] = (weakref.ref(storage, lambda _: shadows.pop(key, None)),
                             torch.zeros(storage.nbytes() // t.element_size(), dtype=torch.float64))
        return self.shadows[key][1].as_strided(t.shape, t.stride(), t.storage_offset())

    def bound(self, t: torch.Tensor) -> torch.Tensor:
        """The shadow of `t`, zeros where none was made."""
        s = self.shadow(t)
        return torch.zeros(t.shape, dtype=torch.float64) if s is None else s

    def _set(self, t: torch.Tensor, shadow: torch.Tensor | None) -> None:
        current = self.shadow(t)
        if shadow is None and current is None:
            return  # exact, and nothing to overwrite
        if current is None:
            current = self._new_shadow(t)
        if shadow is None:
            current.zero_()
        else:
            current.copy_(shadow.expand(t.shape))
            torch.nan_to_num_(current, nan=0.0, posinf=0.0, neginf=0.0) if not math.isfinite(float(current.sum())) else None

    def _copy(self, t: torch.Tensor) -> torch.Tensor:
        """A copy of `t` with its shadow: what an in-place operation reads."""
        c = t.detach().clone()
        self._set(c, self.shadow(t))
        return c

    # ------------------------------------------------------------ dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = _kind(func)
        if kind.passthrough:
            return func(*args, **kwargs)  # a view (shadows follow storages), or nothing to bound
        if func is aten._local_scalar_dense.default:
            value = func(*args, **kwargs)
            shadow = self.shadow(args[0]) if _floating(args[0]) else None
            if isinstance(value, float) and shadow is not None:
                self.scalar_bounds[value] = max(self.scalar_bounds.get(value, 0.0), float(shadow.max()))
            return value
        if kind.composite:  # an operation made of others: run them, each bounded
            with self:
                return func.decompose(*args, **kwargs)
        written = kind.written_tensors(args, kwargs)
        before = {id(a): self._copy(a) for a in written}  # the values an in-place operation reads
        out = func(*args, **kwargs)
        outputs = out if isinstance(out, (list, tuple)) else [out]
        targets = [o for o in outputs if _floating(o)] or written
        if not targets:
            return out
        if before:
            args, kwargs = _map(lambda a: before.get(id(a), a) if isinstance(a, torch.Tensor) else a, args, kwargs)
        floats = [a for a in _leaves(args, kwargs) if _floating(a)]
        if kind.random or kind.constant or not floats:
            shadows = [None] * len(targets)  # a random draw, a constant, a step: exact
        elif kind.foreach:
            shadows = self._foreach(func, args, kwargs)
        else:
            shadows = self._rule(func, kind, args, kwargs, floats, out, targets)
        for t, s in zip(targets, shadows):
            self._set(t, s)
        return out

    # ------------------------------------------------------------ rules
    def _rule(self, func, kind, args, kwargs, floats, out, targets) -> list:
        shadows = [self.shadow(a) for a in floats]
        if func in PUTS:
            accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
            return [self._sum(func, args, kwargs, floats, shadows) if accumulate
                    else self._move(func, args, kwargs, shadows)]
        if func in SUMS or func in PRODUCTS:
            return [self._sum(func, args, kwargs, floats, shadows, products=func in PRODUCTS)]
        if func in MEANS:
            return [self._sum(func, args, kwargs, floats, shadows, count=floats[0].numel() / max(targets[0].numel(), 1))]
        if func in MOVES:
            return [self._move(func, args, kwargs, shadows)]
        if func in SELECTIONS:
            known = [s for s in shadows if s is not None]
            if not known:
                return [None]
            return [known[0] if len(known) == 1 else torch.stack(torch.broadcast_tensors(*known)).amax(0)]
        if func in ORDERED:
            return [self._ordered(func, args, kwargs, out, shadows[0])]
        if func in EXTREMES:
            return [self._extreme(func, args, kwargs, shadows[0])]
        if kind.pointwise:
            return [self._pointwise(func, args, kwargs, floats, shadows, targets[0])]
        if func in decomposition_table:
            return self._decomposed(func, args, kwargs, len(targets))
        raise NotImplementedError(f"autograder.rounding has no rule for {func}: give it one (autograder/rounding.py)")

    @staticmethod
    def _call(func, args, kwargs, pick, scalar=None):
        """func with the i-th floating tensor of its arguments replaced by pick(i, tensor) and each
        float by scalar(float) (kept when scalar is None)."""
        count = [-1]

        def one(a):
            if _floating(a):
                count[0] += 1
                return pick(count[0], a)
            return scalar(a) if scalar is not None and isinstance(a, float) else a

        a, k = _map(one, args, kwargs)
        return func(*a, **k)

    def _move(self, func, args, kwargs, shadows) -> torch.Tensor | None:
        if all(s is None for s in shadows):
            return None
        return self._call(func, args, kwargs, lambda i, t: self.bound(t).clone(), scalar=lambda s: 0.0)

    def _sum(self, func, args, kwargs, floats, shadows, products: bool = False, count: float | None = None):
        """A sum's shadow: its inputs' carried (all together through a linear operation, with its
        coefficients squared; one at a time through the others' squares for a product), plus its
        own rounding, summation_variance(n) (sum |x_i|)^2."""
        def f(pick, scalar):
            return self._call(func, args, kwargs, lambda i, t: pick(i), scalar=scalar)

        total = None
        if any(s is not None for s in shadows):
            if not products:
                total = f(lambda i: self.bound(floats[i]).clone(), lambda s: s * s)
                if count is not None:  # a mean: the sum's shadow over count^2
                    total = total.div_(count)
            else:
                squares = [a.detach().to(torch.float64).square() for a in floats]
                for j in (j for j, s in enumerate(shadows) if s is not None):
                    term = f(lambda i: shadows[i].clone() if i == j else squares[i], lambda s: s * s)
                    total = term if total is None else total.add_(term)
        absolute = f(lambda i: floats[i].detach().abs().to(torch.float64), abs)
        if self._exact_sum(floats, absolute, products):
            return total
        if count is None and func in (aten.sum.default, aten.sum.dim_IntList):
            count = floats[0].numel() / max(absolute.numel(), 1)
        elif count is None and products:
            count = floats[0].shape[-1] if floats[0].dim() else 1
        if count is not None:
            own = absolute.square_().mul_(summation_variance(float(count)))
        else:
            own = summation_variance(f(lambda i: torch.ones_like(floats[i], dtype=torch.float64), abs)).mul_(absolute.square_())
        return own if total is None else own.add_(total)

    def _exact_sum(self, floats: list[torch.Tensor], absolute: torch.Tensor, products: bool) -> bool:
        """Every term and partial sum a multiple of one power of two that the precision holds
        whole: the sum is exact in any order (counts, sums of masks or of small integers). Tried
        on the first values first: a coarser grain than all of them have, so most sums fail there."""
        if absolute.numel() == 0:
            return True
        top = float(absolute.max())
        for part in (slice(0, 64), slice(None)):
            grains = [_grain(a.detach().flatten()[part], self.bits) for a in floats]
            if any(g is None for g in grains):
                return False
            grain = math.prod(grains) if products else min(grains)
            if not math.isinf(grain) and top > grain * 2.0**self.bits:
                return False
        return True

    @staticmethod
    def _named(func, args, kwargs) -> dict:
        from torch.fx.operator_schemas import normalize_function

        return normalize_function(func, args, kwargs, normalize_to_only_use_kwargs=True).kwargs

    def _ordered(self, func, args, kwargs, out, shadow) -> torch.Tensor | None:
        if shadow is None or shadow.dim() == 0:
            return shadow
        dim, values, indices = self._named(func, args, kwargs).get("dim", -1), out[0], out[1]
        if values.dim() < shadow.dim():  # keepdim=False
            return shadow.gather(dim, indices.unsqueeze(dim)).squeeze(dim)
        return shadow.gather(dim, indices)

    def _extreme(self, func, args, kwargs, shadow) -> torch.Tensor | None:
        if shadow is None:
            return None
        named = self._named(func, args, kwargs)
        dim = named.get("dim")
        if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) or shadow.dim() == 0:
            return shadow.max() if shadow.numel() else shadow.sum()
        return shadow.amax(dim=dim, keepdim=bool(named.get("keepdim", False)))

    def _pointwise(self, func, args, kwargs, floats, shadows, result) -> torch.Tensor:
        """Each input's shadow carried through the function, plus the result's own rounding, one
        unit in the last place, squared. Carried: by the derivatives for + - * /, else the square of
        the function's change over eps32 times the input's deviation sqrt(shadow) (a secant; the
        other side where the first leaves the domain)."""
        wide = [a.detach().to(torch.float64) for a in floats]
        inplace = bool(_kind(func).written)
        if result.dtype == torch.float64 and all(a.dtype == torch.float64 for a in floats):
            base = result.detach()
        else:
            base = self._call(func, args, kwargs, lambda i, t: wide[i].clone() if inplace else wide[i])
        total = self._arithmetic(func, args, kwargs, wide, shadows, base)
        if total is NotImplemented:
            total = None
            for j, shadow in enumerate(shadows):
                if shadow is None:
                    continue
                deviation = shadow.sqrt()
                span = None
                for step in (STEP, -STEP):
                    moved = self._call(func, args, kwargs, lambda i, t: wide[i] + step * deviation if i == j
                                       else (wide[i].clone() if inplace else wide[i]))
                    part = moved.sub_(base).div_(STEP).square_()
                    span = part if span is None else torch.where(torch.isfinite(span), span, part)
                    if math.isfinite(float(span.sum())):
                        break
                total = span if total is None else total.add_(span)
        own = base.square()
        if self.bits < 53:  # none where the result is representable: a correctly rounded operation makes it
            own.masked_fill_(base.to(PRECISIONS[self.bits]) == base, 0.0)
        return own if total is None else own.add_(total)

    @staticmethod
    def _arithmetic(func, args, kwargs, wide, shadows, base):
        """The carried shadow of a + b, a - b, b - a (rsub), a * b, a / b by their derivatives (None
        when nothing is carried), or NotImplemented for another operation."""
        name = func.overloadpacket.__name__.rstrip("_")
        if name not in ("add", "sub", "rsub", "mul", "div") or (name == "div" and kwargs.get("rounding_mode")):
            return NotImplemented
        if all(s is None for s in shadows):
            return None
        operands, k = [], 0
        for a in args[:2]:
            if _floating(a):
                operands.append((wide[k], shadows[k]))
                k += 1
            else:
                operands.append((a.to(torch.float64) if isinstance(a, torch.Tensor) else a, None))
        (a, va), (b, vb) = operands
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        zero = torch.zeros((), dtype=torch.float64)
        va = zero if va is None else va
        vb = zero if vb is None else vb
        if name in ("add", "sub"):
            return va + vb * (alpha * alpha)
        if name == "rsub":
            return va * (alpha * alpha) + vb
        if name == "mul":
            return va * (b * b) + vb * (a * a)
        return (va + vb * base.square()) / (b * b)  # d(a/b) = da / b - (a/b) db / b

    def _decomposed(self, func, args, kwargs, count: int) -> list:
        """The bounds of an operation's decomposition, run within the mode (on copies of what an
        in-place operation writes: `__torch_dispatch__` hands those in)."""
        with self:
            result = decomposition_table[func](*args, **kwargs)
        results = [] if result is NotImplemented else \
            [r for r in (result if isinstance(result, (list, tuple)) else [result]) if _floating(r)]
        if len(results) < count:
            raise NotImplementedError(f"autograder.rounding: the decomposition of {func} does not apply here")
        return [self.shadow(r) for r in results[:count]]

    def _foreach(self, func, args, kwargs) -> list:
        """A foreach operation as its single-tensor operation on each tensor of its list, within the mode."""
        name = func.overloadpacket.__name__[len("_foreach_"):]
        single = aten.linalg_vector_norm if name == "norm" else getattr(aten, name)
        tensors, shadows = args[0], []
        for i in range(len(tensors)):
            each = [a[i] if isinstance(a, (list, tuple)) and len(a) == len(tensors) else a for a in args]
            with self:
                r = single(*each, **{key: v for key, v in kwargs.items() if v is not None})
            shadows.append(self.shadow(r))
        return shadows


def bound_run(run, precision: torch.dtype):
    """(outputs, bounds): `run()` (a case's reference on its float64 inputs, returning outputs in
    plain form) within RoundingBound, and the tree of its outputs' bounds in the units of the
    values (the shadow times eps of `precision`, the precision a correct computation of the case
    works in): a float64 tensor of each floating tensor's shape, a float for each Python number
    (0.0 for one not read out of a tensor), None elsewhere. Attention runs its math form (matmuls
    and a softmax), so that its bound is theirs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    eps = torch.finfo(precision).eps
    mode = RoundingBound(bits=1 - round(math.log2(eps)))
    with sdpa_kernel(SDPBackend.MATH), mode:
        out = run()

    def walk(o):
        if isinstance(o, dict):
            return {k: walk(v) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v) for v in o]
        if _floating(o):
            return mode.bound(o).sqrt() * (LAMBDA * eps)
        if isinstance(o, float):
            return math.sqrt(mode.scalar_bounds.get(o, 0.0)) * LAMBDA * eps
        return None

    return out, walk(out)
