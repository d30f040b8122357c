"""The public functions of the elementwise family (``elementwise.py``) that are more than a
call of one op: ``clamp``, ``where`` and ``masked_fill``'s checks, ``add``/``sub``'s ``alpha``,
``div``'s rounding modes, PyTorch's aliases (``multiply``, ``greater``, ``absolute``...),
``x += y`` as an in-place op, and the composites ``addcmul``, ``lerp``, ``float_power``...
"""
from __future__ import annotations

import numbers
from collections import namedtuple

import numpy

from ..dispatch import FUNCTIONS, OPS, apply_inplace, defcomposite, expose
from .. import promotion as _promotion
from ..dtypes import BFLOAT16, is_floating
from ..promotion import torch_name
from .._tensor import Tensor
from .arguments import _call


@expose(public=("clamp", "clip"), methods=("clamp", "clip"))
def clamp(x, min=None, max=None):  # noqa: A002 - PyTorch's names
    """Limit values to ``[min, max]`` (either may be None; tensors are allowed)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' and 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _call("clamp.Tensor", x, min, max)
    return _call("clamp", x, min=min, max=max)


@expose(methods=("clamp_", "clip_"))
def clamp_(x, min=None, max=None):  # noqa: A002
    """In-place :func:`clamp` with number bounds."""
    if min is None and max is None:
        raise ValueError("clamp_: at least one of 'min' and 'max' must not be None")
    return apply_inplace(OPS["clamp"], x, (), {"min": min, "max": max})


@expose(public="where")
def where(condition, input, other):  # noqa: A002
    """``input`` where ``condition`` holds, ``other`` elsewhere (broadcast)."""
    return _call("where", condition, input, other)


@expose(methods="where")
def _where_method(self, condition, other):
    """``Tensor.where(condition, other)``: ``self`` where ``condition`` holds."""
    return _call("where", condition, self, other)


def _fill_value(op, x, value):
    """A 0-d tensor ``value`` that needs a gradient or carries a tangent stays a tensor (it
    gets the sum of the gradient at the filled positions); any other is a number."""
    if not isinstance(value, Tensor):
        return value
    if value.ndim != 0:
        raise RuntimeError(f"{op} only supports a 0-dimensional value tensor, but got tensor "
                           f"with {value.ndim} dimension(s).")
    if value.requires_grad or value._extra and value._extra.get("tangents"):   # a dual tensor
        return value if value.dtype == x.dtype else value.to(dtype=x.dtype)
    return value.item()


@expose(public="masked_fill", methods="masked_fill")
def masked_fill(x, mask, value):
    """``x`` with ``value`` (a number or a 0-d tensor) where ``mask`` is True."""
    value = _fill_value("masked_fill", x, value)
    if isinstance(value, Tensor):
        return _call("where", mask, value, x)
    return _call("masked_fill", x, mask, value=value)


@expose(methods="masked_fill_")
def masked_fill_(x, mask, value):
    """In-place :func:`masked_fill`."""
    value = _fill_value("masked_fill_", x, value)
    if isinstance(value, Tensor):
        return x.copy_(_call("where", mask, value, x))
    return apply_inplace(OPS["masked_fill"], x, (mask,), {"value": value})


def _augmented(name, inplace):
    def method(self, other):
        return getattr(self, inplace)(other)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``self {name[2:-2]}= other`` in place, as PyTorch: ``self.{inplace}(other)``."
    return method


# As PyTorch, `x += y` changes x in place (aliases see it, the version counter moves, saved-tensor
# checks apply), where Python would otherwise rebind x to a new tensor.
for _name, _inplace in (("__iadd__", "add_"), ("__isub__", "sub_"), ("__imul__", "mul_"),
                        ("__itruediv__", "div_"), ("__ipow__", "pow_"),
                        ("__iand__", "bitwise_and_"), ("__ior__", "bitwise_or_"),
                        ("__ixor__", "bitwise_xor_"), ("__ilshift__", "bitwise_left_shift_"),
                        ("__irshift__", "bitwise_right_shift_")):
    expose(methods=_name)(_augmented(_name, _inplace))


def _plain_alpha(input, other, alpha) -> bool:  # noqa: A002
    """Is ``alpha`` 1 (the plain op)? Else check it as PyTorch's alpha_check does against the
    result dtype: no float alpha for integers, a bool alpha for bools only."""
    if alpha is not True and alpha == 1:
        return True
    _alpha_dtype(input, other, alpha)
    return False


def _alpha(input, other, alpha):  # noqa: A002
    """``alpha`` as PyTorch's kernels use it: in a bfloat16 result's own dtype (its add with
    alpha=0.3 multiplies by 0.30078125)."""
    if _alpha_dtype(input, other, alpha) is BFLOAT16:
        return float(numpy.asarray(alpha, dtype=numpy.float32).astype(BFLOAT16))
    return alpha


def _alpha_dtype(input, other, alpha):  # noqa: A002
    dtype = _promotion.result_type(*(x._data if isinstance(x, Tensor) else x
                                     for x in (input, other)))
    if isinstance(alpha, bool) and dtype != numpy.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if dtype.kind in "biu" and isinstance(alpha, numbers.Number) and not isinstance(
            alpha, numbers.Integral):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                           "point number.")
    return dtype


@expose(public="add", methods="add")
def add(input, other, *, alpha=1):  # noqa: A002 - PyTorch's names
    """``input + alpha * other`` (one AddBackward0 node, alpha or not, as PyTorch's)."""
    if _plain_alpha(input, other, alpha):
        return _call("add", input, other)
    return _call("add.alpha", input, other, alpha=_alpha(input, other, alpha))


@expose(public="sub", methods="sub")
def sub(input, other, *, alpha=1):  # noqa: A002
    """``input - alpha * other`` (one SubBackward0 node)."""
    if _plain_alpha(input, other, alpha):
        return _call("sub", input, other)
    return _call("sub.alpha", input, other, alpha=_alpha(input, other, alpha))


@expose(methods="add_")
def add_(self, other, *, alpha=1):
    """In-place :func:`add`: ``self += alpha * other``."""
    if _plain_alpha(self, other, alpha):
        return apply_inplace(OPS["add"], self, (other,))
    return apply_inplace(OPS["add.alpha"], self, (other,), {"alpha": _alpha(self, other, alpha)})


@expose(methods=("sub_", "subtract_"))
def sub_(self, other, *, alpha=1):
    """In-place :func:`sub`: ``self -= alpha * other``."""
    if _plain_alpha(self, other, alpha):
        return apply_inplace(OPS["sub"], self, (other,))
    return apply_inplace(OPS["sub.alpha"], self, (other,), {"alpha": _alpha(self, other, alpha)})


@expose(public="rsub")
def rsub(input, other, *, alpha=1):  # noqa: A002
    """``other - alpha * input`` (PyTorch's torch.rsub: RsubBackward0 for a tensor ``other``,
    RsubBackward1 for a number)."""
    plain = _plain_alpha(input, other, alpha)
    if plain and not isinstance(other, Tensor):
        return _call("rsub", input, other)
    return _call("rsub.Tensor", input, other,
                 **({} if plain else {"alpha": _alpha(input, other, alpha)}))


_ROUNDING_MODES = (None, "trunc", "floor")


@expose(public=("div", "divide"), methods=("div", "divide"))
def div(input, other, *, rounding_mode=None):  # noqa: A002
    """``input / other``: true division, or rounded (``"trunc"``: towards zero, ``"floor"``:
    down; DivBackward2, a zero gradient)."""
    if rounding_mode is None:
        return _call("div", input, other)
    if rounding_mode not in _ROUNDING_MODES:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return _call("div.Tensor_mode", input, other, rounding_mode=rounding_mode)


@expose(public="true_divide", methods="true_divide")
def true_divide(input, other):  # noqa: A002
    """Alias of :func:`div` without rounding."""
    return _call("div", input, other)


# PyTorch's other aliases of the arithmetic and comparison ops: the same op and node.
def _alias(alias, op):
    def fn(input, other):  # noqa: A002
        return _call(op, input, other)

    fn.__name__ = fn.__qualname__ = alias
    fn.__doc__ = f"Alias of :func:`{op}`."
    expose(public=alias, methods=alias)(fn)


for _alias_name, _op in (("multiply", "mul"), ("greater", "gt"), ("greater_equal", "ge"),
                         ("less", "lt"), ("less_equal", "le"), ("not_equal", "ne")):
    _alias(_alias_name, _op)
# The comparisons' own Tensor methods (x.eq(y)), beside their operators.
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    expose(methods=_op)(FUNCTIONS[_op])
del _alias_name, _op


@expose(public="subtract", methods="subtract")
def subtract(input, other, *, alpha=1):  # noqa: A002
    """Alias of :func:`sub`."""
    return sub(input, other, alpha=alpha)


@expose(public="positive", methods="positive")
def positive(input):  # noqa: A002
    """``input`` itself (PyTorch refuses a bool tensor)."""
    if input.dtype == numpy.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@expose(public="isin")
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """True where an element of ``elements`` is among ``test_elements`` (either may be a
    number)."""
    like = elements if isinstance(elements, Tensor) else test_elements
    if not isinstance(elements, Tensor):
        elements = like.new_tensor(elements)
    if not isinstance(test_elements, Tensor):
        test_elements = like.new_tensor(test_elements)
    return _call("isin", elements, test_elements, assume_unique=assume_unique, invert=invert)


FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


@expose(public="frexp", methods="frexp")
def frexp(input):  # noqa: A002
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in
    [0.5, 1) (exponent int32; not differentiable)."""
    return FrexpResult(*_call("frexp", input))


@defcomposite("ldexp", public="ldexp", methods="ldexp")
def ldexp(input, other):  # noqa: A002
    """``input * 2**other`` (MulBackward0; PyTorch's own node is LdexpBackward0). An integer
    ``other`` scales in ``input``'s floating dtype (bfloat16 and float16 stay)."""
    if (isinstance(other, Tensor) and isinstance(input, Tensor) and other.dtype.kind in "iub"
            and is_floating(input.dtype)):
        other = other.to(dtype=input.dtype)   # (float64's 2**200 is not float32's inf)
    return input * (2.0 ** other)


@expose(public="addcmul", methods="addcmul")
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    return _call("addcmul", input, tensor1, tensor2, value=value)


@expose(methods="addcmul_")
def addcmul_(x, tensor1, tensor2, *, value=1):
    """In-place :func:`addcmul`."""
    return apply_inplace(OPS["addcmul"], x, (tensor1, tensor2), {"value": value})


@expose(public="addcdiv", methods="addcdiv")
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2`` (AddcdivBackward0)."""
    return _call("addcdiv", input, tensor1, tensor2, value=value)


@expose(methods="addcdiv_")
def addcdiv_(x, tensor1, tensor2, *, value=1):
    """In-place :func:`addcdiv`."""
    return apply_inplace(OPS["addcdiv"], x, (tensor1, tensor2), {"value": value})


# PyTorch's aliases: the same op and node as the name they stand for.
@expose(public="absolute", methods="absolute")
def absolute(input):  # noqa: A002
    """Alias of :func:`abs`."""
    return _call("abs", input)


@expose(public="negative", methods="negative")
def negative(input):  # noqa: A002
    """Alias of :func:`neg`."""
    return _call("neg", input)


@expose(methods="absolute_")
def absolute_(x):
    """Alias of ``abs_``."""
    return apply_inplace(OPS["abs"], x, ())


@expose(methods="negative_")
def negative_(x):
    """Alias of ``neg_``."""
    return apply_inplace(OPS["neg"], x, ())


@expose(methods="square_")
def square_(x):
    """In-place :func:`square` (PowBackward0, as PyTorch's)."""
    return apply_inplace(OPS["pow"], x, (2,))


@expose(public="allclose", methods="allclose")
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """Whether :func:`isclose` holds everywhere (a Python bool)."""
    return bool(_call("isclose", input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)
                .all().item())


@expose(public="equal", methods="equal")
def equal(input, other):  # noqa: A002
    """True when both have the same shape and elements (a Python bool; NaN is unequal)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool((input == other).all().item())


@defcomposite("float_power", public="float_power", methods="float_power")
def float_power(input, exponent):  # noqa: A002
    """``input ** exponent`` computed in double precision (complex128 for complex inputs)."""
    complex_ = any(getattr(v, "dtype", numpy.dtype(type(v))).kind == "c"
                   for v in (input, exponent))
    dtype = numpy.complex128 if complex_ else numpy.float64
    base = input.to(dtype=dtype) if isinstance(input, Tensor) else input
    if isinstance(exponent, Tensor):
        exponent = exponent.to(dtype=dtype)
    return base ** exponent


@expose(methods="float_power_")
def float_power_(x, exponent):
    """In-place :func:`float_power`: ``x`` must already be double (complex128) precision."""
    want = numpy.complex128 if x.dtype.kind == "c" or getattr(
        exponent, "dtype", numpy.dtype(type(exponent))).kind == "c" else numpy.float64
    if x.dtype != want:
        raise RuntimeError(f"the base given to float_power_ has dtype {torch_name(x.dtype)} but "
                           f"the operation's result requires dtype {torch_name(want)}")
    return x.copy_(float_power(x, exponent))


@defcomposite("square", public="square", methods="square")
def square(x):
    """``x ** 2`` (PowBackward0, as PyTorch's square)."""
    return _call("pow", x, 2)


@expose(public="lerp", methods="lerp")
def lerp(input, end, weight):  # noqa: A002
    """``input + weight * (end - input)``; ``weight`` a number or a tensor."""
    if isinstance(weight, Tensor):
        return _call("lerp.Tensor", input, end, weight)
    return _call("lerp", input, end, weight=weight)


@expose(methods="lerp_")
def lerp_(x, end, weight):
    """In-place :func:`lerp`."""
    if isinstance(weight, Tensor):
        return apply_inplace(OPS["lerp.Tensor"], x, (end, weight))
    return apply_inplace(OPS["lerp"], x, (end,), {"weight": weight})
