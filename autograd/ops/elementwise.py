"""Elementwise primitives: arithmetic, unary math, comparisons."""
from __future__ import annotations

from .. import backend
from ..dispatch import defop

# Arithmetic. ``a``/``b`` may be tensors or Python scalars; the engine sums each gradient
# back to its input's shape, so rules ignore broadcasting.
defop("add", lambda xp, a, b: a + b, (lambda F, g, out, a, b: g, lambda F, g, out, a, b: g))
defop("sub", lambda xp, a, b: a - b, (lambda F, g, out, a, b: g, lambda F, g, out, a, b: -g))
defop("mul", lambda xp, a, b: a * b,
      (lambda F, g, out, a, b: g * b, lambda F, g, out, a, b: g * a))
defop("div", lambda xp, a, b: a / b,
      (lambda F, g, out, a, b: g / b, lambda F, g, out, a, b: -g * out / b))
defop("neg", lambda xp, x: -x, (lambda F, g, out, x: -g,))
defop("pow", lambda xp, a, b: a ** b,
      (lambda F, g, out, a, b: g * b * a ** (b - 1),
       lambda F, g, out, a, b: g * out * F.log(a)))

# Unary math.
defop("exp", lambda xp, x: xp.exp(x), (lambda F, g, out, x: g * out,))
defop("log", lambda xp, x: xp.log(x), (lambda F, g, out, x: g / x,))
defop("sqrt", lambda xp, x: xp.sqrt(x), (lambda F, g, out, x: g / (out * 2),))
defop("tanh", lambda xp, x: xp.tanh(x), (lambda F, g, out, x: g * (1 - out * out),))
defop("relu", lambda xp, x: xp.maximum(x, 0), (lambda F, g, out, x: g * (out > 0),))

# Comparisons: no gradient, boolean results.
defop("eq", lambda xp, a, b: a == b)
defop("ne", lambda xp, a, b: a != b)
defop("lt", lambda xp, a, b: a < b)
defop("le", lambda xp, a, b: a <= b)
defop("gt", lambda xp, a, b: a > b)
defop("ge", lambda xp, a, b: a >= b)

# Copies and casts.
defop("clone", lambda xp, x: x.copy(), (lambda F, g, out, x: g,))
defop("to_dtype", lambda xp, x, dtype: x.astype(dtype),
      (lambda F, g, out, x, dtype: F.to_dtype(g, dtype=x.dtype),), meta=(0,),
      node_name="ToCopyBackward0")
defop("zero", lambda xp, x: xp.zeros_like(x), (lambda F, g, out, x: F.zeros_like(g),))
defop("zeros_like", lambda xp, x: xp.zeros_like(x))


def _to_device_fwd(xp, x, device, src):
    return backend.to_device(x, device)


defop("to_device", _to_device_fwd,
      (lambda F, g, out, x, device, src: F.to_device(g, device=src, src=device),),
      moves_device=True, node_name="ToCopyBackward0")
