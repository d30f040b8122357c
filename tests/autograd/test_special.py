"""Special functions (torch.special and PyTorch's lgamma, digamma, polygamma, mvlgamma, erfinv,
i0, sinc, logit, igamma/igammac) against PyTorch 2.13 (CPU): node names, values and gradients
(float64, every expected number is what torch gave for the same expression), dtypes, PyTorch's
values at the edges, its errors, and where this engine deliberately gives the more exact value.
The op table (op_cases.py) checks the same functions against SciPy and finite differences."""
import math

import numpy as np
import pytest

import gradtrace.autograd as ag

NAN = math.nan

# expression of x = [0.3, 0.6, 2.5] (float64), torch's grad_fn.name(), torch's values, and
# torch's gradient of their sum with respect to x
TORCH = [
    ('ag.lgamma(x)', 'LgammaBackward0',
     [1.0957979948180756, 0.39823385806923495, 0.2846828704729192],
     [-3.502524222200133, -1.5406192138931907, 0.7031566406452431]),
    ('ag.digamma(x)', 'DigammaBackward0',
     [-3.502524222200133, -1.5406192138931907, 0.7031566406452431],
     [12.245364544940365, 3.636209672237019, 0.4903577562398206]),
    ('ag.polygamma(2, x)', 'PolygammaBackward0',
     [-75.27253658872601, -9.96283153714346, -0.23620405164172736],
     [743.1417646550497, 47.407041045345785, 0.2239058488172521]),
    ('x.mvlgamma(2)', 'MvlgammaBackward0',
     [3.4296605285767137, 3.223311452728141, 0.8570478133976193],
     [0.5324672110937279, -11.964374154304268, 1.1259409757437102]),
    ('ag.erfinv(x - 0.5)', 'ErfinvBackward0',
     [-0.1791434546212917, 0.08885599049425767, NAN],
     [0.9151293475072344, 0.8932517253051874, NAN]),
    ('ag.i0(x)', 'I0Backward0',
     [1.0226268793515967, 1.0920453643173396, 3.289839144050123],
     [0.15169384000359282, 0.313704025604922, 2.5167162452886984]),
    ('ag.sinc(x)', 'SincBackward0',
     [0.8583936913341398, 0.5045511524271047, 0.12732395447351627],
     [-0.9020281301388888, -1.3559469113367533, -0.05092958178940638]),
    ('ag.logit(x / 3)', 'LogitBackward0',
     [-2.1972245773362196, -1.3862943611198908, 1.6094379124341007],
     [3.7037037037037037, 2.0833333333333335, 2.4000000000000004]),
    ('ag.logit(x / 3, 0.15)', 'LogitBackward0',
     [-1.7346010553881064, -1.3862943611198908, 1.6094379124341007],
     [0.0, 2.0833333333333335, 2.4000000000000004]),
    ('ag.special.i0e(x)', 'SpecialI0EBackward0',
     [0.7575806251825477, 0.5993272030798963, 0.27004644161220276],
     [-0.6452030645427088, -0.42716278353837667, -0.06346179208093622]),
    ('ag.special.i1(x)', 'SpecialI1Backward0',
     [0.15169384000359282, 0.313704025604922, 2.5167162452886984],
     [0.5169807460062873, 0.5692053216424695, 2.283152645934644]),
    ('ag.special.i1e(x)', 'SpecialI1EBackward0',
     [0.11237756063983881, 0.17216441954151965, 0.20658464953126654],
     [0.2706111957432461, 0.14022208430251049, -0.019172067731570375]),
    ('ag.special.erfcx(x)', 'SpecialErfcxBackward0',
     [0.7345993345676554, 0.567804717386587, 0.2108063640611436],
     [-0.6876195663549194, -0.4470135062316082, -0.0743473467897946]),
    ('ag.special.ndtr(x)', 'MulBackward1',
     [0.6179114221889527, 0.7257468822499265, 0.9937903346742238],
     [0.3813878154605241, 0.3332246028917996, 0.01752830049356853]),
    ('ag.special.ndtri(x / 3)', 'SpecialNdtriBackward0',
     [-1.2815515655446004, -0.8416212335729143, 0.9674215661017012],
     [1.8993532853723343, 1.1906381155257872, 1.3341287910068311]),
    ('ag.special.log_ndtr(x)', 'SpecialLogNdtrBackward0',
     [-0.48141016158848127, -0.3205539719875189, -0.006229025485860001],
     [0.6172208536127346, 0.45914713661428674, 0.017637825486916735]),
    ('ag.special.entr(x)', 'SpecialEntrBackward0',
     [0.3611918412977808, 0.30649537425959444, -2.2907268296853878],
     [0.20397280432593612, -0.4891743762340093, -1.916290731874155]),
    ('ag.special.xlog1py(x, x - 0.4)', 'SpecialXlog1PyBackward0',
     [-0.0316081546973479, 0.10939293407637275, 2.8285052787277514],
     [0.22797281767550703, 0.6823215567939546, 1.9378537243943263]),
    ('ag.special.gammaln(x)', 'LgammaBackward0',
     [1.0957979948180756, 0.39823385806923495, 0.2846828704729192],
     [-3.502524222200133, -1.5406192138931907, 0.7031566406452431]),
    ('ag.special.psi(x)', 'DigammaBackward0',
     [-3.502524222200133, -1.5406192138931907, 0.7031566406452431],
     [12.245364544940365, 3.636209672237019, 0.4903577562398206]),
    ('ag.special.multigammaln(x, 2)', 'MvlgammaBackward0',
     [3.4296605285767137, 3.223311452728141, 0.8570478133976193],
     [0.5324672110937279, -11.964374154304268, 1.1259409757437102]),
    ('ag.special.expit(x)', 'SigmoidBackward0',
     [0.574442516811659, 0.6456563062257954, 0.9241418199787566],
     [0.24445831169074586, 0.22878424045665732, 0.07010371654510807]),
    ('ag.special.gammainc(x.detach(), x)', 'IgammaBackward0',
     [0.7269573437103662, 0.6681982858168398, 0.584119813004492],
     [0.5752117576599179, 0.4520766162380366, 0.2440830426987748]),
    ('ag.special.gammaincc(x.detach(), x)', 'IgammacBackward0',
     [0.2730426562896338, 0.33180171418316046, 0.41588018699550783],
     [-0.5752117576599179, -0.4520766162380366, -0.2440830426987748]),
    ('ag.igamma(x.detach() + 1, x)', 'IgammaBackward0',
     [0.1517455860504482, 0.21612166957880305, 0.34003677030571755],
     [0.5752117576599179, 0.4520766162380365, 0.2440830426987748]),
]


@pytest.mark.parametrize("expr, node, value, grad", TORCH, ids=[r[0] for r in TORCH])
def test_values_gradients_and_node_names_match_torch(expr, node, value, grad):
    x = ag.tensor([0.3, 0.6, 2.5], dtype=np.float64, requires_grad=True)
    y = eval(expr, {"ag": ag, "x": x})  # noqa: S307 - the table's expressions
    # torch.special.ndtr is a C++ composite whose last node is a mul by a Scalar
    # (MulBackward1); here the same composite's mul is MulBackward0.
    assert y.grad_fn.name() == (node if node != "MulBackward1" else "MulBackward0")
    np.testing.assert_allclose(y.detach().numpy(), value, rtol=1e-12, atol=1e-300)
    (g,) = ag.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), grad, rtol=1e-9, atol=1e-300)


def test_every_torch_special_function_is_there():
    """torch.special's names (2.13), but the orthogonal polynomials and airy_ai."""
    names = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "digamma", "entr", "erf",
             "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc",
             "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
             "logsumexp", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
             "modified_bessel_k1", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
             "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "sinc", "softmax",
             "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]
    missing = [n for n in names if not callable(getattr(ag.special, n, None))]
    assert not missing
    for name in ("lgamma", "digamma", "polygamma", "mvlgamma", "erfinv", "i0", "sinc", "logit",
                 "igamma", "igammac"):
        assert callable(getattr(ag, name)) and callable(getattr(ag.Tensor, name)), name
    for name in ("lgamma_", "digamma_", "polygamma_", "mvlgamma_", "erfinv_", "i0_", "sinc_",
                 "logit_"):
        assert callable(getattr(ag.Tensor, name)), name


def test_in_place_forms_write_the_result():
    x = ag.tensor([0.3, 0.6])
    want = ag.lgamma(x).numpy().copy()
    x.lgamma_()
    np.testing.assert_array_equal(x.numpy(), want)
    y = ag.tensor([0.3, 0.6])
    want = ag.polygamma(1, y).numpy().copy()
    y.polygamma_(1)
    np.testing.assert_array_equal(y.numpy(), want)


def test_softmax_and_log_softmax_take_a_dtype():
    x = ag.tensor([[1.0, 2.0, 3.0]])
    out = ag.special.softmax(x, 1, dtype=np.float64)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.numpy().sum(), 1.0)
    assert ag.special.log_softmax(x, -1).dtype == np.float32


# --------------------------------------------------------------------------- dtypes


FUNCS = [ag.lgamma, ag.digamma, lambda x: ag.polygamma(1, x), lambda x: ag.mvlgamma(x + 3, 2),
         ag.erfinv, ag.i0, ag.sinc, ag.logit, ag.special.i0e, ag.special.i1, ag.special.i1e,
         ag.special.erfcx, ag.special.ndtr, ag.special.ndtri, ag.special.log_ndtr,
         ag.special.entr, ag.special.bessel_j0, ag.special.modified_bessel_k1,
         ag.special.spherical_bessel_j0]


@pytest.mark.parametrize("fn", FUNCS)
@pytest.mark.parametrize("dtype, want", [(np.float32, np.float32), (np.float64, np.float64),
                                         (np.float16, np.float16), (np.int64, np.float32),
                                         (np.bool_, np.float32)])
def test_dtypes_are_pytorchs(fn, dtype, want):
    """torch.lgamma(torch.tensor([1, 2])) is float32 (the default dtype), where SciPy's ufunc
    would give float64; float16 stays float16 (computed in float32)."""
    x = ag.tensor(np.array([0.25, 0.5]).astype(dtype) if dtype != np.int64 else [1, 2])
    assert fn(x).dtype == np.dtype(want)


def test_default_dtype_decides_the_float_of_integer_inputs():
    prev = ag.get_default_dtype()
    ag.set_default_dtype(np.float64)
    try:
        assert ag.lgamma(ag.tensor([1, 2])).dtype == np.float64
    finally:
        ag.set_default_dtype(prev)
    assert ag.lgamma(ag.tensor([1, 2])).dtype == np.float32


@pytest.mark.parametrize("fn", [ag.special.xlog1py, ag.special.zeta])
def test_two_argument_functions_promote_as_pytorch(fn):
    """torch.special.xlog1py(float32 tensor, 2.0) is float32 (a Python number does not widen
    a tensor), an int64 tensor with a float32 one float32 (NumPy: float64)."""
    f32 = ag.tensor([2.5, 3.0])
    i64 = ag.tensor([2, 3])
    assert fn(f32, 2.0).dtype == np.float32
    assert fn(2.0, f32).dtype == np.float32
    assert fn(i64, f32).dtype == np.float32
    assert fn(i64, 2).dtype == np.float32
    assert fn(f32.double(), f32).dtype == np.float64


# --------------------------------------------------------------------------- the edges

INF = math.inf
# function, x, PyTorch 2.13's value (float64)
EDGES = [
    (ag.lgamma, [0.0, -1.0, INF, -INF, NAN], [INF, INF, INF, INF, NAN]),
    (ag.digamma, [0.0, -1.0, INF, -INF], [-INF, NAN, INF, NAN]),   # -inf at 0 since torch 1.8
    (ag.erfinv, [1.0, -1.0, 2.0, 0.0], [INF, -INF, NAN, 0.0]),
    (ag.i0, [0.0, INF, -INF], [1.0, NAN, NAN]),                     # SciPy's and torch's NaN
    (ag.special.i1, [0.0, -0.0, INF], [0.0, 0.0, NAN]),
    (ag.special.i0e, [0.0, INF, -INF], [1.0, 0.0, 0.0]),
    (ag.sinc, [0.0, 1.0, INF], [1.0, 3.8981718325193755e-17, NAN]),   # sin(pi) / pi
    (ag.logit, [0.0, 1.0, 0.5, 2.0], [-INF, INF, 0.0, NAN]),
    (ag.special.ndtri, [0.0, 1.0, 0.5, 2.0], [-INF, INF, 0.0, NAN]),
    (ag.special.entr, [0.0, -1.0, INF], [0.0, -INF, -INF]),
    (ag.special.erfcx, [INF, -INF], [0.0, INF]),
    (ag.special.log_ndtr, [INF, -INF], [-0.0, -INF]),
    (ag.special.spherical_bessel_j0, [0.0, INF, -INF], [1.0, 0.0, 0.0]),
    (lambda x: ag.polygamma(1, x), [-INF], [NAN]),
]


@pytest.mark.parametrize("fn, x, want", EDGES)
def test_values_at_the_edges_are_pytorchs(fn, x, want):
    got = fn(ag.tensor(np.array(x))).numpy()
    np.testing.assert_array_equal(got, want)
    number = ~np.isnan(np.array(want))    # zeros' signs too (a NaN's sign means nothing)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(np.array(want)[number]))


# function, x, PyTorch 2.13's gradient of the sum (float64)
GRAD_EDGES = [
    (ag.special.i1, [0.0, 1e-20], [0.5, 0.5]),          # the slope at 0, where out / x is 0 / 0
    (ag.special.i1e, [0.0, -1e-20], [0.5, 0.5]),
    (ag.sinc, [0.0, 1.0], [0.0, -1.0]),
    (ag.logit, [-0.5, 1.5], [NAN, NAN]),                 # outside [0, 1]: NaN
    (lambda x: ag.logit(x, 0.25), [0.1, 0.9, 0.5], [0.0, 0.0, 4.0]),   # clamped: 0
    (ag.special.entr, [0.0, -1.0], [INF, NAN]),
    (lambda x: ag.special.xlog1py(x, ag.tensor([-1.0, -2.0, 1.0])), [0.0, 0.0, 0.0],
     [0.0, 0.0, math.log(2)]),
]


@pytest.mark.parametrize("fn, x, want", GRAD_EDGES)
def test_gradients_at_the_edges_are_pytorchs(fn, x, want):
    t = ag.tensor(np.array(x), requires_grad=True)
    (g,) = ag.grad(fn(t).sum(), t)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-15)


def test_more_exact_than_pytorch_where_pytorch_loses_the_value():
    """Deliberate differences, each where PyTorch's number is an artifact of its formula:
    sinc's slope near 0 (torch at 1e-8: -2.1e-8 from cancellation; the slope is -pi^2 x / 3),
    ndtr far out on the left (torch at -30: 0.0; the value is 4.9e-198), polygamma at the
    poles (torch: trigamma(-1) = 6.6e32; the function has a pole there), polygamma(2, x)'s
    limit at inf (torch NaN; 0), and i1's slope at a NaN input (torch 0.5; NaN)."""
    x = ag.tensor([1e-8, 1e-3], dtype=np.float64, requires_grad=True)
    (g,) = ag.grad(ag.sinc(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), -(math.pi ** 2) * x.detach().numpy() / 3
                               + math.pi ** 4 * x.detach().numpy() ** 3 / 30, rtol=1e-12)
    np.testing.assert_allclose(ag.special.ndtr(ag.tensor([-30.0], dtype=np.float64)).numpy(),
                               [4.906713927148187e-198], rtol=1e-12)
    np.testing.assert_array_equal(ag.polygamma(1, ag.tensor([-1.0, INF])).numpy(), [INF, 0.0])
    np.testing.assert_array_equal(ag.polygamma(2, ag.tensor([INF])).numpy(), [0.0])
    n = ag.tensor([NAN], requires_grad=True)
    (g,) = ag.grad(ag.special.i1(n).sum(), n)
    assert np.isnan(g.numpy()).all()


def test_sinc_slope_is_exact_across_the_series_boundary():
    """The series below |pi x| = 1 and the closed form above meet without a step."""
    edge = 1 / math.pi
    x = ag.tensor([edge * (1 - 1e-9), edge * (1 + 1e-9)], dtype=np.float64, requires_grad=True)
    (g,) = ag.grad(ag.sinc(x).sum(), x)
    t = math.pi * edge
    exact = math.pi * (t * math.cos(t) - math.sin(t)) / t ** 2
    np.testing.assert_allclose(g.numpy(), [exact, exact], rtol=1e-8)


# --------------------------------------------------------------------------- errors


def test_errors_are_pytorchs():
    x = ag.tensor([0.5, 1.5])
    with pytest.raises(RuntimeError, match=r"polygamma\(n, x\) does not support negative n\."):
        ag.polygamma(-1, x)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        ag.mvlgamma(x, 0)
    # torch.igamma(torch.tensor([1]), torch.tensor([2])): NotImplementedError "igamma_cpu" not
    # implemented for 'Long'
    with pytest.raises(NotImplementedError, match="igamma.*int64"):
        ag.igamma(ag.tensor([1]), ag.tensor([2]))
    assert ag.lgamma(x).shape == (2,)   # still usable


def test_backward_that_pytorch_does_not_implement_raises_its_error():
    a = ag.tensor([2.5, 3.0], dtype=np.float64, requires_grad=True)
    q = ag.tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    z = ag.special.zeta(a, q)
    assert z.grad_fn.name() == "SpecialZetaBackward0"
    with pytest.raises(NotImplementedError, match="the derivative for 'zeta' is not implemented"):
        z.sum().backward()
    with pytest.raises(NotImplementedError,
                       match="the derivative for 'igamma: input' is not implemented"):
        ag.igamma(a, q).sum().backward()
    # Only the second argument of igamma is differentiable: with the first constant it works.
    (g,) = ag.grad(ag.igamma(a.detach(), q).sum(), q)
    assert np.isfinite(g.numpy()).all()


def test_bessel_functions_pytorch_does_not_differentiate_give_no_history():
    x = ag.tensor([0.5, 1.5], requires_grad=True)
    for fn in (ag.special.bessel_j0, ag.special.bessel_y1, ag.special.modified_bessel_k0,
               ag.special.scaled_modified_bessel_k1, ag.special.spherical_bessel_j0):
        out = fn(x)
        assert not out.requires_grad and out.grad_fn is None
