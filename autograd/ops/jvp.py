"""Forward-mode rules (jvp) of the core primitives: one per input, ``rule(F, t, out, *inputs)``
returns that input's contribution to the output tangent. Reverse rules live with each op's
``defop``; these are the forward counterparts (as JAX's ``defjvp`` sits beside ``defvjp``).
"""
from __future__ import annotations

from ..dispatch import OPS, defjvp

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


# --------------------------------------------------------------------------- the op library
# Elementwise ops have a diagonal Jacobian, so J·t equals Jᵀ·t: the reverse rule applied to
# the tangent is the forward rule (broadcasting included: the result takes the output's shape).
# softmax's Jacobian is symmetric, so the same holds for it.
_SELF_ADJOINT = ("log1p", "expm1", "sin", "cos", "rsqrt", "reciprocal", "abs", "sigmoid",
                 "leaky_relu", "erf", "where", "maximum", "minimum", "masked_fill", "clamp",
                 "fill", "copy", "softmax")
for _name in _SELF_ADJOINT:
    if _name in OPS:
        defjvp(_name, *OPS[_name].vjp)


def _jointly_linear(name, diff):
    """Rules for an op that is linear in its differentiable inputs (positions ``diff``) taken
    together: input i contributes the op applied with its tangent in its place and the other
    differentiable inputs set to zero."""
    op = OPS[name]

    def rule_for(i):
        def rule(F, t, out, *inputs, **attrs):
            args = [t if j == i else (F.zeros_like(x) if j in diff else x)
                    for j, x in enumerate(inputs)]
            return getattr(F, name)(*args, **attrs)
        return rule

    defjvp(name, *[rule_for(i) if i in diff else None for i in range(len(op.vjp))])


for _name, _diff in (("flip", (0,)), ("roll", (0,)), ("tril", (0,)),
                     ("triu", (0,)), ("gather", (0,)), ("gather_backward", (0,)),
                     ("scatter_add", (0, 2)), ("index_put", (0, 1)), ("embedding", (0,)),
                     ("embedding_backward", (0,)), ("im2col", (0,)), ("col2im", (0,)),
                     ("cat", tuple(range(len(OPS["cat"].vjp))))):
    if _name in OPS:
        _jointly_linear(_name, _diff)
if "pad" in OPS:   # the padding constant is a constant: its tangent is zero
    defjvp("pad", lambda F, t, out, x, pad, value=0.0: F.pad(t, pad=pad, value=0.0))


def _kept(F, x, shape, dim, keepdim):
    """A reduction's result with the reduced dims kept (size 1), ready to broadcast."""
    from .reduction import kept_shape  # noqa: PLC0415

    return x if keepdim or dim is None and x.ndim == len(shape) else F.reshape(
        x, shape=kept_shape(shape, dim))


def _reduce_like(F, values, dim, keepdim):
    return F.sum(values, dim=dim, keepdim=keepdim)


if "amax" in OPS:
    def _extreme_jvp(F, t, out, x, dim=None, keepdim=False):
        hit = F.to_dtype(x == _kept(F, out, x.shape, dim, keepdim), dtype=t.dtype)
        count = F.sum(hit, dim=dim, keepdim=True)
        return _reduce_like(F, t * hit / count, dim, keepdim)

    defjvp("amax", _extreme_jvp)
    defjvp("amin", _extreme_jvp)
if "logsumexp" in OPS:
    defjvp("logsumexp", lambda F, t, out, x, dim=None, keepdim=False: _reduce_like(
        F, t * F.exp(x - _kept(F, out, x.shape, dim, keepdim)), dim, keepdim))
if "prod" in OPS:
    defjvp("prod", lambda F, t, out, x, dim=None, keepdim=False: _reduce_like(
        F, t * F.prod_others(x, dim=dim), dim, keepdim))
if "log_softmax" in OPS:
    defjvp("log_softmax", lambda F, t, out, x, dim: t - F.sum(F.exp(out) * t, dim=dim, keepdim=True))
if "linear" in OPS:
    defjvp("linear",
           lambda F, t, out, x, weight, bias: F.linear(t, weight, None),
           lambda F, t, out, x, weight, bias: F.linear(x, t, None),
           lambda F, t, out, x, weight, bias: t)
if "einsum" in OPS:
    defjvp("einsum",
           lambda F, t, out, a, b, equation: F.einsum(t, b, equation=equation),
           lambda F, t, out, a, b, equation: F.einsum(a, t, equation=equation))
if "conv2d" in OPS:
    def _conv_x(F, t, out, x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
        return F.conv2d(t, weight, None, stride=stride, padding=padding, dilation=dilation, groups=groups)

    def _conv_w(F, t, out, x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
        return F.conv2d(x, t, None, stride=stride, padding=padding, dilation=dilation, groups=groups)

    def _conv_b(F, t, out, x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
        return F.reshape(t, shape=(1, t.shape[0], 1, 1))

    defjvp("conv2d", _conv_x, _conv_w, _conv_b)
if "max" in OPS:
    def _max_dim_jvp(F, t, out, x, dim, keepdim=False):
        """Values: the tangent at the selected index; indices: none."""
        from .reduction import kept_shape  # noqa: PLC0415

        idx = out[1] if keepdim else F.reshape(out[1], shape=kept_shape(x.shape, dim))
        picked = F.gather(t, idx, dim=dim)
        return (picked if keepdim else F.reshape(picked, shape=out[0].shape)), None

    defjvp("max", _max_dim_jvp)
    defjvp("min", _max_dim_jvp)
