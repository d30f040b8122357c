"""PyTorch's type promotion (autograd/promotion.py, applied by dispatch.apply_op): every
expected dtype below is what torch 2.13 gives for the same expression. NumPy alone gives
float64 for most of the integer-and-float mixes; a sweep of 2,007 (op, dtype, dtype) cases
against torch found no difference left."""
import subprocess
import sys

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.promotion import promote_types, result_type


def _t(dtype, zero_dim=False):
    v = [True, False] if dtype == "bool" else [1, 2]
    return ag.tensor(np.array(v[0] if zero_dim else v, dtype=dtype))


# expression of a and b, a's dtype, b's dtype (b0: a zero-dim tensor), torch's result dtype
CASES = [
    ("a + b", "int64", "float32", "float32"),       # NumPy: float64
    ("a * b", "int32", "float16", "float16"),       # NumPy: float64
    ("a - b", "int16", "float16", "float16"),       # NumPy: float32
    ("a + b", "uint8", "int8", "int16"),
    ("a + b", "bool", "bool", "bool"),
    ("a + b", "bool", "int8", "int8"),
    ("a * b", "float32", "float64 b0", "float32"),  # a zero-dim tensor does not widen
    ("a * b", "int64", "float64 b0", "float64"),    # ... but raises the category
    ("a * b", "int8", "int64 b0", "int8"),
    ("a / b", "int64", "int64", "float32"),         # true division: the default float
    ("a / b", "uint8", "bool", "float32"),
    ("a ** b", "int64", "int64", "int64"),
    ("ag.maximum(a, b)", "int64", "float32", "float32"),
    ("ag.where(a > 1, a, b)", "int64", "float32", "float32"),
    ("ag.atan2(a, b)", "int64", "int64", "float32"),
    ("ag.fmod(a, b)", "int32", "float16", "float16"),
]


@pytest.mark.parametrize("expr, da, db, want", CASES)
def test_tensor_tensor_promotion_is_pytorchs(expr, da, db, want):
    b = _t(db.split()[0], zero_dim=db.endswith("b0"))
    out = eval(expr, {"ag": ag, "a": _t(da), "b": b})  # noqa: S307 - the table's expressions
    assert out.dtype == np.dtype(want)


# expression of a, a's dtype, torch's result dtype
SCALAR_CASES = [
    ("a * 2.5", "int64", "float32"), ("2.5 * a", "int64", "float32"),
    ("a + 1", "int64", "int64"), ("a + 1", "bool", "int64"), ("a * 2.5", "bool", "float32"),
    ("a * 2.5", "float16", "float16"), ("1 - a", "int8", "int8"), ("a / 2", "int64", "float32"),
    ("a ** 0.5", "int64", "float32"), ("2.0 ** a", "int64", "float32"),
    ("a * 1j", "float64", "complex128"), ("a * 1j", "int64", "complex64"),
    ("a.sqrt()", "int64", "float32"), ("a.exp()", "uint8", "float32"),
    ("a.sigmoid()", "bool", "float32"), ("a.tanh()", "int8", "float32"),
    ("a.reciprocal()", "int64", "float32"), ("a.erf()", "int32", "float32"),
    ("a.clamp(0.5)", "int64", "float32"), ("a.clamp(1)", "bool", "int64"),
    ("a.clamp(0, 1)", "int64", "int64"), ("ag.clamp_min(a, 0.5)", "int8", "float32"),
    ("a.sum()", "uint8", "int64"), ("a.cumsum(0)", "uint8", "int64"),
    ("a.prod()", "bool", "int64"), ("a.neg()", "int8", "int8"), ("a.abs()", "int16", "int16"),
    ("a // 2", "int64", "int64"), ("ag.floor_divide(a, 2.5)", "int64", "float32"),
]


@pytest.mark.parametrize("expr, da, want", SCALAR_CASES)
def test_tensor_number_and_unary_promotion_is_pytorchs(expr, da, want):
    out = eval(expr, {"ag": ag, "a": _t(da)})  # noqa: S307
    assert out.dtype == np.dtype(want)


def test_mixed_arithmetic_runs_in_the_result_dtype():
    """An int64 tensor times 2.5 is float32 arithmetic in PyTorch (the integer converted,
    then multiplied): the same numbers here, not a float64 product rounded afterwards."""
    big = ag.tensor([16777217, 3])                     # 2**24 + 1: not a float32
    np.testing.assert_array_equal((big * 1.0).numpy(), np.float32([16777216.0, 3.0]))
    np.testing.assert_array_equal((big / 1).numpy(), np.float32([16777216.0, 3.0]))
    x = ag.tensor([1, 2, 3])
    np.testing.assert_array_equal(x.sigmoid().numpy(), 1 / (1 + np.exp(-np.float32([1, 2, 3]))))


def test_default_dtype_is_the_float_of_integer_results():
    prev = ag.get_default_dtype()
    ag.set_default_dtype(np.float64)
    try:
        assert (_t("int64") * 2.5).dtype == np.float64
        assert _t("int64").sqrt().dtype == np.float64
    finally:
        ag.set_default_dtype(prev)


def test_gradients_keep_each_inputs_dtype():
    """float32 weights times an int64 tensor: a float32 result, and the weights' gradient
    float32, as PyTorch's."""
    w = ag.tensor([0.5, 1.5], requires_grad=True)
    (w * ag.tensor([2, 3])).sum().backward()
    assert w.grad.dtype == np.float32
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 3.0])
    w64 = ag.tensor(0.5, dtype=np.float64, requires_grad=True)
    y = ag.tensor([1.0, 2.0]) * w64          # a zero-dim float64: the result stays float32
    assert y.dtype == np.float32
    y.sum().backward()
    assert w64.grad.dtype == np.float64 and float(w64.grad) == 3.0


@pytest.mark.parametrize("a, b, want", [
    (np.int64, np.float32, np.float32), (np.int16, np.float16, np.float16),
    (np.uint8, np.int8, np.int16), (np.bool_, np.int8, np.int8),
    (np.float16, np.float64, np.float64), (np.complex64, np.float64, np.complex128),
    (np.int64, np.complex64, np.complex64),
])
def test_promote_types_is_torchs(a, b, want):
    # torch.promote_types(torch.int64, torch.float32) is float32 (NumPy: float64)
    assert promote_types(np.dtype(a), np.dtype(b)) == np.dtype(want)
    assert promote_types(np.dtype(b), np.dtype(a)) == np.dtype(want)


def test_result_type_classes():
    i64, f32 = np.zeros(2, np.int64), np.zeros(2, np.float32)
    assert result_type(i64, 2.5) == np.float32
    assert result_type(f32, np.zeros((), np.float64)) == np.float32
    assert result_type(i64, np.zeros((), np.float64)) == np.float64
    assert result_type(2, 3) == np.int64 and result_type(True, 2.5) == np.float32
    assert result_type(f32, None, 1j) == np.complex64


def test_forward_arithmetic_is_silent_as_pytorchs():
    """torch.log(torch.tensor([0.])) is -inf without a word; so is this engine's (NumPy's
    RuntimeWarnings from the ops' own code are filtered), while the user's own NumPy calls
    still warn. Checked in a fresh interpreter with warnings shown by default (pytest resets
    the warning filters around the imports of its collection, which drops this one)."""
    code = ("import warnings; warnings.simplefilter('default')\n"
            "import numpy as np, gradtrace.autograd as ag\n"
            "z = ag.tensor([0.0, -1.0, 1e30])\n"
            "ag.log(z); z / 0; z.sqrt(); (z * 1e30).exp(); ag.sinc(ag.tensor([np.inf]))\n"
            "ag.logit(z); ag.special.entr(z); z.var(); ag.tensor([1.0]).std()\n"
            "print('ops done', flush=True)\n"
            "np.log(np.zeros(1))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert res.stdout.strip() == "ops done"
    # the one warning: line 7, the user's own np.log(0)
    assert res.stderr.count("RuntimeWarning") == 1 and res.stderr.startswith("<string>:7:")


# in-place expression on x = int64 [1, 2] (f: float32 [1., 2.]), PyTorch's error or result
INPLACE = [
    ("x.add_(2.5)", "result type Float can't be cast to the desired output type Long"),
    ("x.mul_(f)", "result type Float can't be cast to the desired output type Long"),
    ("x.div_(2)", "result type Float can't be cast to the desired output type Long"),
    ("x.sqrt_()", "result type Float can't be cast to the desired output type Long"),
    ("x.sigmoid_()", "result type Float can't be cast to the desired output type Long"),
    ("x.clamp_(0.5)", "result type Float can't be cast to the desired output type"),
    ("b.add_(1)", "result type Long can't be cast to the desired output type Bool"),
    ("x.add_(1)", [2, 3]), ("x.copy_(f)", [1, 2]), ("x.fill_(2.5)", [2, 2]),
    ("x.clamp_(0, 1)", [1, 1]), ("x.masked_fill_(x > 1, 2.5)", [1, 2]),
    ("f.add_(x)", [2.0, 4.0]), ("f.mul_(ag.tensor(2.0, dtype=np.float64))", [2.0, 4.0]),
]


@pytest.mark.parametrize("expr, want", INPLACE)
def test_in_place_results_that_cannot_be_cast_raise_as_pytorch(expr, want):
    """Where NumPy would truncate 2.5 into an int64 tensor, PyTorch raises before writing;
    the tensor keeps its values and its dtype."""
    env = {"ag": ag, "np": np, "x": ag.tensor([1, 2]), "f": ag.tensor([1.0, 2.0]),
           "b": ag.tensor([True, False])}
    target = env[expr[0]]
    before = target.numpy().copy()
    if isinstance(want, str):
        with pytest.raises(RuntimeError, match=want):
            eval(expr, env)  # noqa: S307
        np.testing.assert_array_equal(target.numpy(), before)
    else:
        out = eval(expr, env)  # noqa: S307
        assert out is target and out.dtype == before.dtype
        np.testing.assert_array_equal(out.numpy(), want)


# expression on x = int64 [1, 2], PyTorch 2.13's error class and message
INTEGER_REFUSALS = [
    ("x.mean()", RuntimeError, "mean(): could not infer output dtype. Input dtype must be "
     "either a floating point or complex dtype. Got: Long"),
    ("x.mean(0)", RuntimeError, "mean(): could not infer output dtype"),
    ("x.var()", RuntimeError, "std and var only support floating point and complex dtypes"),
    ("x.std()", RuntimeError, "std and var only support floating point and complex dtypes"),
    ("x.norm()", RuntimeError, "linalg.vector_norm: Expected a floating point or complex "
     "tensor as input. Got Long"),
    ("ag.nanmean(x)", RuntimeError, "nanmean(): expected input to have floating point or "
     "complex dtype but got Long"),
    ("ag.dist(x, x)", RuntimeError, "norm(): input dtype should be either floating point or "
     "complex. Got Long instead."),
    # torch: NotImplementedError "softmax_lastdim_kernel_impl" not implemented for 'Long'
    ("ag.softmax(x, 0)", NotImplementedError, "not implemented for 'Long'"),
    ("ag.nn.functional.log_softmax(x, 0)", NotImplementedError, "not implemented for 'Long'"),
]


@pytest.mark.parametrize("expr, cls, message", INTEGER_REFUSALS)
def test_floating_reductions_refuse_integers_as_pytorch(expr, cls, message):
    """Where NumPy answered (mean in float64; the norm of [1, 2] truncated to 2), PyTorch
    raises."""
    with pytest.raises(cls, match=message.replace("(", r"\(").replace(")", r"\)")):
        eval(expr, {"ag": ag, "x": ag.tensor([1, 2])})  # noqa: S307
    # logsumexp of integers is the default float, as PyTorch's
    out = ag.logsumexp(ag.tensor([1, 2]), 0)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), np.log(np.exp(1) + np.exp(2)), rtol=1e-6)


def test_in_place_composites_refuse_a_higher_category_too():
    """The in-place forms of composites (addmm_, cumsum_...) write through copy_, which casts;
    they refuse a float result for an integer tensor first, as apply_inplace does. PyTorch:
    int.addmm_(float, float) raises (its words: "self and mat2 must have the same dtype");
    int.index_fill_(0, idx, 2.5) fills 2 (the number is cast), and so does this engine."""
    x = ag.tensor([[1, 2], [3, 4]])
    m = ag.ones(2, 2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        x.addmm_(m, m)
    np.testing.assert_array_equal(x.numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(x.index_fill_(0, ag.tensor([0]), 2.5).numpy(),
                                  [[2, 2], [3, 4]])
    f = ag.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert f.addmm_(m, m) is f
    np.testing.assert_array_equal(f.numpy(), [[3.0, 4.0], [5.0, 6.0]])
    assert f.cumsum_(0) is f and f.dtype == np.float32
