"""Forward-mode rules (jvp) of the core primitives: one per input, ``rule(F, t, out, *inputs)``
returns that input's contribution to the output tangent. Reverse rules live with each op's
``defop``; these are the forward counterparts (as JAX's ``defjvp`` sits beside ``defvjp``).
"""
from __future__ import annotations

from ..dispatch import defjvp

defjvp("add", lambda F, t, out, a, b: t, lambda F, t, out, a, b: t)
defjvp("sub", lambda F, t, out, a, b: t, lambda F, t, out, a, b: -t)
defjvp("mul", lambda F, t, out, a, b: t * b, lambda F, t, out, a, b: a * t)
defjvp("div", lambda F, t, out, a, b: t / b, lambda F, t, out, a, b: -t * out / b)
defjvp("neg", lambda F, t, out, x: -t)
defjvp("pow", lambda F, t, out, a, b: t * b * a ** (b - 1),
       lambda F, t, out, a, b: t * out * F.log(a))
defjvp("exp", lambda F, t, out, x: t * out)
defjvp("log", lambda F, t, out, x: t / x)
defjvp("sqrt", lambda F, t, out, x: t / (out * 2))
defjvp("tanh", lambda F, t, out, x: t * (1 - out * out))
defjvp("relu", lambda F, t, out, x: t * (out > 0))
defjvp("clone", lambda F, t, out, x: t)
defjvp("to_dtype", lambda F, t, out, x, dtype: F.to_dtype(t, dtype=dtype))
defjvp("to_device", lambda F, t, out, x, device, src: F.to_device(t, device=device, src=src))
defjvp("zero", lambda F, t, out, x: F.zeros_like(t))
defjvp("sum", lambda F, t, out, x, dim=None, keepdim=False: F.sum(t, dim=dim, keepdim=keepdim))
defjvp("reshape", lambda F, t, out, x, shape: F.reshape(t, shape=shape))
defjvp("transpose", lambda F, t, out, x, dim0, dim1: F.transpose(t, dim0=dim0, dim1=dim1))
defjvp("permute", lambda F, t, out, x, dims: F.permute(t, dims=dims))
defjvp("expand", lambda F, t, out, x, shape: F.expand(t, shape=shape))
defjvp("sum_to_size", lambda F, t, out, x, shape: F.sum_to_size(t, shape=shape))
defjvp("matmul", lambda F, t, out, a, b: F.matmul(t, b), lambda F, t, out, a, b: F.matmul(a, t))
defjvp("index", lambda F, t, out, x, key: F.index(t, key=key))
defjvp("index_backward", lambda F, t, out, g, shape, key: F.index_backward(t, shape=shape, key=key))
