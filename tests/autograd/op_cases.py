"""The table of op cases: one list drives the forward check against NumPy, the float64
finite-difference gradient check, and CPU/GPU parity. A registered op without a case fails
``test_every_op_has_a_case``.

Each case: ``OpCase(op, fn, ref, inputs)``
- ``op``: the registered op (or composite) name the case covers;
- ``fn(*tensors)``: calls the op through the public API;
- ``ref(*arrays)``: the same computation in NumPy (None: no forward comparison, e.g. for ops
  whose only purpose is a backward);
- ``tol``: finite-difference step/tolerances when the defaults do not fit the case;
- ``inputs``: a function ``rng -> list`` of NumPy arrays (float64) or other values;
  ``grad=False`` for cases without a gradient (comparisons), ``nondiff`` lists input positions
  not differentiated (indices, masks).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import autograd


@dataclass
class OpCase:
    op: str
    fn: Callable
    ref: Callable | None
    inputs: Callable
    grad: bool = True
    nondiff: tuple = ()
    name: str = ""
    covers: tuple = field(default_factory=tuple)   # further op names the case exercises
    tol: dict = field(default_factory=dict)        # check_grad overrides (eps, rtol, atol)

    def __post_init__(self):
        self.name = self.name or self.op


def pos(*shape):
    """Positive values away from 0 (for log, sqrt, div)."""
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def rnd(*shape):
    return lambda rng: rng.standard_normal(shape)


def away0(*shape):
    """Values away from 0 (relu's kink, comparisons' ties)."""
    return lambda rng: rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 2.0, shape)


def ins(*makers):
    return lambda rng: [m(rng) if callable(m) else m for m in makers]


CASES: list[OpCase] = [
    # elementwise arithmetic, with broadcasting and scalars
    OpCase("add", lambda a, b: a + b, np.add, ins(rnd(3, 4), rnd(4))),
    OpCase("add", lambda a, b: a + b, np.add, ins(rnd(2, 1, 3), rnd(4, 1)), name="add_broadcast"),
    OpCase("add", lambda a: a + 2.5, lambda a: a + 2.5, ins(rnd(3)), name="add_scalar"),
    OpCase("sub", lambda a, b: a - b, np.subtract, ins(rnd(3, 4), rnd(3, 1))),
    OpCase("sub", lambda a: 1.0 - a, lambda a: 1.0 - a, ins(rnd(3)), name="rsub_scalar"),
    OpCase("mul", lambda a, b: a * b, np.multiply, ins(rnd(3, 4), rnd(3, 4))),
    OpCase("mul", lambda a, b: a * b, np.multiply, ins(lambda rng: rng.standard_normal((5, 3)).T, rnd(3, 1)), name="mul_noncontig"),
    OpCase("div", lambda a, b: a / b, np.divide, ins(rnd(3, 4), pos(4))),
    OpCase("div", lambda a: 2.0 / a, lambda a: 2.0 / a, ins(pos(3)), name="rdiv_scalar"),
    OpCase("neg", lambda a: -a, np.negative, ins(rnd(3, 2))),
    OpCase("pow", lambda a, b: a ** b, np.power, ins(pos(3, 2), rnd(3, 2))),
    OpCase("pow", lambda a: a ** 3, lambda a: a ** 3, ins(rnd(4)), name="pow_scalar"),
    OpCase("pow", lambda a: 2.0 ** a, lambda a: 2.0 ** a, ins(rnd(4)), name="rpow_scalar"),
    # unary math
    OpCase("exp", lambda a: a.exp(), np.exp, ins(rnd(3, 4))),
    OpCase("log", lambda a: a.log(), np.log, ins(pos(3, 4))),
    OpCase("sqrt", lambda a: a.sqrt(), np.sqrt, ins(pos(3, 4))),
    OpCase("tanh", lambda a: a.tanh(), np.tanh, ins(rnd(3, 4))),
    OpCase("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), ins(away0(3, 4))),
    # comparisons (no gradient)
    OpCase("eq", lambda a, b: a == b, np.equal, ins(away0(4), away0(4)), grad=False),
    OpCase("ne", lambda a, b: a != b, np.not_equal, ins(away0(4), away0(4)), grad=False),
    OpCase("lt", lambda a, b: a < b, np.less, ins(away0(4), away0(4)), grad=False),
    OpCase("le", lambda a, b: a <= b, np.less_equal, ins(away0(4), away0(4)), grad=False),
    OpCase("gt", lambda a, b: a > b, np.greater, ins(away0(4), away0(4)), grad=False),
    OpCase("ge", lambda a, b: a >= b, np.greater_equal, ins(away0(4), away0(4)), grad=False),
    # copies and casts
    OpCase("clone", lambda a: a.clone(), np.copy, ins(rnd(3))),
    OpCase("to_dtype", lambda a: a.to(dtype="float32").to(dtype="float64"),
           lambda a: a.astype(np.float32).astype(np.float64), ins(rnd(3)),
           tol={"eps": 1e-2, "rtol": 1e-3}),  # float32 in the middle: a bigger step
    OpCase("to_device", lambda a: a.to("cpu") * 1.0, lambda a: a * 1.0, ins(rnd(3))),
    OpCase("zero", lambda a: (a * 1.0).zero_() + a, lambda a: a, ins(rnd(3)), covers=("zeros_like",)),
    # reductions
    OpCase("sum", lambda a: a.sum(), np.sum, ins(rnd(3, 4))),
    OpCase("sum", lambda a: a.sum(dim=1), lambda a: a.sum(axis=1), ins(rnd(3, 4)), name="sum_dim"),
    OpCase("sum", lambda a: a.sum(dim=(0, -1), keepdim=True),
           lambda a: a.sum(axis=(0, 2), keepdims=True), ins(rnd(2, 3, 4)), name="sum_keepdim_neg"),
    OpCase("mean", lambda a: a.mean(), np.mean, ins(rnd(3, 4))),
    OpCase("mean", lambda a: a.mean(dim=-1, keepdim=True), lambda a: a.mean(-1, keepdims=True),
           ins(rnd(3, 4)), name="mean_dim"),
    # shape
    OpCase("reshape", lambda a: a.reshape(4, 3), lambda a: a.reshape(4, 3), ins(rnd(3, 4))),
    OpCase("reshape", lambda a: a.view(-1), lambda a: a.reshape(-1), ins(rnd(3, 4)), name="view_infer"),
    OpCase("transpose", lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2), ins(rnd(2, 3, 4))),
    OpCase("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), ins(rnd(2, 3, 4))),
    OpCase("expand", lambda a: a.expand(3, -1, 4), lambda a: np.broadcast_to(a, (3, 2, 4)),
           ins(rnd(2, 1))),
    OpCase("sum_to_size", lambda a: autograd.ops.apply_op(autograd.OPS["sum_to_size"], (a,),
                                                          {"shape": (3, 1)}),
           lambda a: a.sum(axis=(0, 2), keepdims=True).reshape(3, 1), ins(rnd(2, 3, 4))),
    # matmul: 2-D, batched with broadcasting, 1-D on either side
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ins(rnd(3, 4), rnd(4, 5))),
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ins(rnd(2, 1, 3, 4), rnd(5, 4, 2)), name="matmul_batched"),
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ins(rnd(4), rnd(2, 4, 3)), name="matmul_1d_left"),
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ins(rnd(2, 3, 4), rnd(4)), name="matmul_1d_right"),
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ins(rnd(4), rnd(4)), name="matmul_dot"),
    # indexing: slices, ints, integer arrays with repeats, boolean masks
    OpCase("index", lambda a: a[1:, ::2], lambda a: a[1:, ::2], ins(rnd(4, 5))),
    OpCase("index", lambda a: a[np.array([0, 2, 0])], lambda a: a[np.array([0, 2, 0])],
           ins(rnd(4, 3)), name="index_repeated", covers=("index_backward",)),
    OpCase("index", lambda a, m: a[m], lambda a, m: a[m],
           ins(rnd(3, 4), lambda rng: rng.uniform(size=(3, 4)) > 0.5), nondiff=(1,), name="index_mask"),
    OpCase("index", lambda a: a[1, :, None], lambda a: a[1, :, None], ins(rnd(3, 4)), name="index_int_none"),
]


def make_inputs(case: OpCase, rng, device="cpu", requires_grad=True):
    """Tensors for a case: float64 arrays become tensors requiring grad (unless nondiff)."""
    raw = case.inputs(rng)
    tensors = []
    for i, x in enumerate(raw):
        if isinstance(x, np.ndarray) and x.dtype == np.float64 and i not in case.nondiff:
            tensors.append(autograd.tensor(x, device=device,
                                           requires_grad=requires_grad and case.grad))
        elif isinstance(x, np.ndarray) and i in case.nondiff:
            tensors.append(autograd.tensor(x, device=device))
        else:
            tensors.append(x)
    return raw, tensors
