"""torch.linalg's decompositions and what is built on them (cholesky, solve_triangular,
cholesky_solve, qr, eigh, eigvalsh, svd, svdvals, pinv, matrix_power, matrix_exp, matrix_norm,
norm) against PyTorch 2.13 (CPU, float64): node names, values, gradients, errors. Every expected
value is what torch gave for the same call. Gradients, forward-mode tangents and second
derivatives against finite differences are in op_cases.py's table (test_ops.py)."""
import math

import numpy as np
import pytest

import gradtrace.autograd as ag

from .gradcheck import compiled_replay_stats

A3 = [[4.0, 2.0, 0.0], [2.0, 3.0, 1.0], [0.0, 1.0, 5.0]]   # symmetric positive-definite
R32 = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
T3 = [[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 4.0]]   # upper triangular
L = ag.linalg


def _t(m, grad=True, dtype=np.float64):
    return ag.tensor(np.array(m, dtype=dtype), requires_grad=grad)


def _cat(*parts):
    return ag.cat([p.flatten() for p in parts])


# expression on A (A3) and R (R32), torch's grad_fn.name()
NODES = [
    ("L.cholesky(A)", "LinalgCholeskyExBackward0"),
    ("L.cholesky(A, upper=True)", "LinalgCholeskyExBackward0"),
    ("L.solve_triangular(A, A, upper=True)", "LinalgSolveTriangularBackward0"),
    ("ag.cholesky_solve(R, L.cholesky(A))", "CholeskySolveBackward0"),
    ("R.cholesky_solve(A, upper=True)", "CholeskySolveBackward0"),
    ("L.qr(R).Q", "LinalgQrBackward0"),
    ("L.qr(R, mode='r').R", "LinalgQrBackward0"),
    ("ag.qr(R)[0]", "LinalgQrBackward0"),
    ("R.qr().R", "LinalgQrBackward0"),
    ("L.eigh(A).eigenvalues", "LinalgEighBackward0"),
    ("L.eigh(A).eigenvectors", "LinalgEighBackward0"),
    ("L.eigvalsh(A)", "LinalgEighBackward0"),
    ("L.svd(R).U", "LinalgSvdBackward0"),
    ("L.svd(R, full_matrices=False).Vh", "LinalgSvdBackward0"),
    ("L.svdvals(R)", "LinalgSvdBackward0"),
    ("ag.svd(R).S", "LinalgSvdBackward0"),
    ("R.svd()[0]", "LinalgSvdBackward0"),
    ("L.pinv(R)", "LinalgPinvBackward0"),
    ("L.lstsq(R, R).solution", "LinalgLstsqBackward0"),
    ("ag.pinverse(R)", "LinalgPinvBackward0"),
    ("R.pinverse()", "LinalgPinvBackward0"),
    ("L.matrix_exp(A)", "LinalgMatrixExpBackward0"),
    ("ag.matrix_exp(A)", "LinalgMatrixExpBackward0"),
    ("A.matrix_exp()", "LinalgMatrixExpBackward0"),
    ("L.matrix_power(A, 3)", "MmBackward0"),
    ("A.matrix_power(2)", "MmBackward0"),
    ("L.matrix_power(A, 1)", "CloneBackward0"),
    ("L.matrix_norm(R)", "LinalgVectorNormBackward0"),
    ("L.matrix_norm(R, ord=2)", "AmaxBackward0"),
    ("L.matrix_norm(R, ord=-1)", "AminBackward0"),
    ("L.norm(R)", "LinalgVectorNormBackward0"),
]


@pytest.mark.parametrize("expr, name", NODES)
def test_node_names_match_torch(expr, name):
    out = eval(expr, {"ag": ag, "L": L, "A": _t(A3), "R": _t(R32)})  # noqa: S307
    assert out.grad_fn.name() == name


# name, input, fn of the input, torch's value, torch's gradient of (value * weights).sum() with
# weights linspace(0.5, 1.5) over the value's entries. Eigen- and singular vectors enter
# squared: their signs are arbitrary (torch's docs: only gauge-invariant functions have a
# gradient that does not depend on them).
FNS = {
    "cholesky": lambda A: L.cholesky(A),
    "cholesky_upper": lambda A: L.cholesky(A, upper=True),
    "solve_triangular": lambda A: L.solve_triangular(A, ag.tensor(np.eye(3)), upper=True),
    "solve_triangular_right_unit": lambda A: L.solve_triangular(
        A, ag.tensor(np.ones((2, 3))), upper=True, left=False, unitriangular=True),
    "cholesky_solve": lambda A: ag.cholesky_solve(ag.tensor(np.ones((3, 1))), L.cholesky(A)),
    "qr": lambda A: _cat(*L.qr(A)),
    "qr_complete_square": lambda A: _cat(*L.qr(A, mode="complete")),
    "eigh": lambda A: _cat(L.eigh(A)[0], L.eigh(A)[1] ** 2),
    "eigvalsh": lambda A: L.eigvalsh(A),
    "svd": lambda A: _cat(L.svd(A, False)[1], L.svd(A, False)[0] ** 2, L.svd(A, False)[2] ** 2),
    "svdvals": lambda A: L.svdvals(A),
    "pinv": lambda A: L.pinv(A),
    "matrix_power_3": lambda A: L.matrix_power(A, 3),
    "matrix_power_-2": lambda A: L.matrix_power(A, -2),
    "matrix_exp": lambda A: L.matrix_exp(A / 4),
}
for _ord in ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf]:
    FNS[f"matrix_norm_{_ord}"] = (lambda o: lambda A: L.matrix_norm(A, ord=o))(_ord)

VALUES = [
    ("cholesky", A3, [[2.0, 0.0, 0.0], [1.0, 1.4142135624, 0.0], [0.0, 0.7071067812, 2.1213203436]],
     [[0.0653434456, 0.1193131089, 0.1578203916], [0.1193131089, 0.1988737822, 0.3093592168], [0.1578203916, 0.3093592168, 0.3535533906]]),
    ("cholesky_upper", A3, [[2.0, 1.0, 0.0], [0.0, 1.4142135624, 0.7071067812], [0.0, 0.0, 2.1213203436]],
     [[0.107641989, 0.034716022, 0.0770145654], [0.034716022, 0.243067956, 0.2209708691], [0.0770145654, 0.2209708691, 0.3535533906]]),
    ("solve_triangular", T3, [[0.5, -0.1666666667, 0.0416666667], [0.0, 0.3333333333, -0.0833333333], [0.0, 0.0, 0.25]],
     [[-0.0885416667, -0.0729166667, -0.09375], [0.0, -0.0555555556, -0.0625], [0.0, 0.0, -0.078125]]),
    ("solve_triangular_right_unit", T3, [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]],
     [[0.0, 0.4, -2.4], [0.0, 0.0, -0.0], [0.0, 0.0, 0.0]]),
    ("cholesky_solve", A3, [[0.1666666667], [0.1666666667], [0.1666666667]],
     [[-0.0, -0.0208333333, -0.0208333333], [-0.0208333333, -0.0416666667, -0.0416666667], [-0.0208333333, -0.0416666667, -0.0416666667]]),
    ("qr", R32, [-0.1690308509, 0.8970852271, -0.5070925528, 0.2760262237, -0.8451542547, -0.3450327797, -5.9160797831, -7.4373574416, 0.0, 0.8280786712],
     [[-2.313141045, 1.1296439756], [-1.2426659431, -0.2339122597], [-0.1721908412, -1.597468495]]),
    ("qr_complete_square", A3, [-0.894427191, 0.3903600292, 0.2182178902, -0.4472135955, -0.7807200584, -0.4364357805, -0.0, -0.4879500365, 0.8728715609, -4.472135955, -3.1304951685, -0.4472135955, 0.0, -2.0493901532, -3.2204702407, 0.0, 0.0, 3.9279220242],
     [[-0.2763431771, -1.7019119421, -0.1819807863], [-1.7491483285, 0.970455791, -2.200939931], [1.984706793, -5.5061346013, 0.6634911167]]),
    ("eigh", A3, [1.2679491924, 4.7320508076, 6.0, 0.3333333333, 0.3333333333, 0.3333333333, 0.6220084679, 0.0446581987, 0.3333333333, 0.0446581987, 0.6220084679, 0.3333333333],
     [[0.5909090909, 0.0716977395, 0.0192113514], [0.0716977395, 0.5646658969, 0.0454545455], [0.0192113514, 0.0454545455, 0.617152285]]),
    ("eigvalsh", A3, [1.2679491924, 4.7320508076, 6.0],
     [[1.0, 0.3943375673, 0.1056624327], [0.3943375673, 0.8556624327, 0.25], [0.1056624327, 0.25, 1.1443375673]]),
    ("svd", R32, [9.5255180916, 0.5143005807, 0.0528299635, 0.7805033698, 0.2753571248, 0.0579762085, 0.6718129116, 0.1615204217, 0.3839406972, 0.6160593028, 0.6160593028, 0.3839406972],
     [[-0.2173280141, 0.322768565], [-0.191525787, 0.4759140628], [0.5615491675, 0.0836050151]]),
    ("svdvals", R32, [9.5255180916, 0.5143005807],
     [[-0.968925274, 0.9113308326], [-0.1209095832, 0.4297285458], [0.7271061076, -0.051873741]]),
    ("pinv", R32, [[-1.3333333333, -0.3333333333, 0.6666666667], [1.0833333333, 0.3333333333, -0.4166666667]],
     [[0.575, -0.55], [0.2, -0.2], [-0.175, 0.15]]),
    ("matrix_power_3", A3, [[108.0, 84.0, 24.0], [84.0, 78.0, 54.0], [24.0, 54.0, 138.0]],
     [[69.0, 77.25, 90.0], [93.75, 102.0, 114.75], [132.0, 140.25, 153.0]]),
    ("matrix_power_-2", A3, [[0.2314814815, -0.2685185185, 0.0648148148], [-0.2685185185, 0.3981481481, -0.1018518519], [0.0648148148, -0.1018518519, 0.0648148148]],
     [[0.0092592593, 0.0005787037, 0.0040509259], [-0.0167824074, -0.025462963, -0.0219907407], [-0.0063657407, -0.0150462963, -0.0115740741]]),
    ("matrix_exp", A3, [[3.0396225496, 1.2669780749, 0.1750884459], [1.2669780749, 2.493677735, 0.7210332604], [0.1750884459, 0.7210332604, 3.5855673641]],
     [[0.6723614144, 0.7734335999, 0.9073348689], [0.9755779707, 1.0766501561, 1.2105514251], [1.3772817778, 1.4783539632, 1.6122552322]]),
    ("matrix_norm_fro", R32, 9.5393920142,
     [[0.0524142418, 0.1048284837], [0.1572427255, 0.2096569673], [0.2620712092, 0.314485451]]),
    ("matrix_norm_nuc", R32, 10.0398186722,
     [[-0.2755016215, 0.3639123382], [0.0680792593, 0.2805326145], [0.4116601402, 0.1971528908]]),
    ("matrix_norm_2", R32, 9.5255180916,
     [[0.0712102047, 0.090203091], [0.1625736806, 0.2059346488], [0.2539371565, 0.3216662066]]),
    ("matrix_norm_-2", R32, 0.5143005807,
     [[-0.3467118262, 0.2737092472], [-0.0944944213, 0.0745979657], [0.1577229837, -0.1245133159]]),
    ("matrix_norm_1", R32, 12.0,
     [[0.0, 0.5], [0.0, 0.5], [0.0, 0.5]]),
    ("matrix_norm_-1", R32, 9.0,
     [[0.5, 0.0], [0.5, 0.0], [0.5, 0.0]]),
    ("matrix_norm_inf", R32, 11.0,
     [[0.0, 0.0], [0.0, 0.0], [0.5, 0.5]]),
    ("matrix_norm_-inf", R32, 3.0,
     [[0.5, 0.5], [0.0, 0.0], [0.0, 0.0]]),
]


@pytest.mark.parametrize("name, m, value, grad", VALUES, ids=[v[0] for v in VALUES])
def test_values_and_gradients_match_torch(name, m, value, grad):
    A = _t(m)
    out = FNS[name](A)
    np.testing.assert_allclose(out.detach().numpy(), value, atol=1e-9)
    weights = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape))
    (out * ag.tensor(weights)).sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), grad, atol=1e-9)


# call, torch's (shape, dtype) of each output, for float32 batched inputs
X = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
SPD32 = (X[..., :3, :] @ np.swapaxes(X[..., :3, :], -1, -2) + 3 * np.eye(3)).astype(np.float32)
SHAPES = [
    (lambda: [L.cholesky(_t(SPD32, dtype=np.float32))], [((2, 3, 3), "float32")]),
    (lambda: L.qr(_t(X, dtype=np.float32)), [((2, 5, 3), "float32"), ((2, 3, 3), "float32")]),
    (lambda: L.qr(_t(X, dtype=np.float32), mode="complete"), [((2, 5, 5), "float32"), ((2, 5, 3), "float32")]),
    (lambda: L.qr(_t(X, dtype=np.float32), mode="r"), [((0,), "float32"), ((2, 3, 3), "float32")]),
    (lambda: L.svd(_t(X, dtype=np.float32)), [((2, 5, 5), "float32"), ((2, 3), "float32"), ((2, 3, 3), "float32")]),
    (lambda: L.svd(_t(X, dtype=np.float32), full_matrices=False),
     [((2, 5, 3), "float32"), ((2, 3), "float32"), ((2, 3, 3), "float32")]),
    (lambda: ag.svd(_t(X)), [((2, 5, 3), "float64"), ((2, 3), "float64"), ((2, 3, 3), "float64")]),
    (lambda: ag.svd(_t(X), compute_uv=False), [((2, 5, 5), "float64"), ((2, 3), "float64"), ((2, 3, 3), "float64")]),
    (lambda: L.eigh(_t(SPD32, dtype=np.float32)), [((2, 3), "float32"), ((2, 3, 3), "float32")]),
    (lambda: [L.pinv(_t(X, dtype=np.float32))], [((2, 3, 5), "float32")]),
    (lambda: [L.matrix_exp(_t(SPD32, dtype=np.float32))], [((2, 3, 3), "float32")]),
    (lambda: [L.svdvals(_t(X, dtype=np.float32))], [((2, 3), "float32")]),
    (lambda: [L.matrix_norm(_t(np.ones((2, 3, 4))), ord=1, dim=(0, 2))], [((3,), "float64")]),
    (lambda: [L.matrix_norm(_t(np.ones((2, 3, 4))), ord="nuc", dim=(2, 0), keepdim=True)], [((1, 3, 1), "float64")]),
    (lambda: [L.solve_triangular(_t(np.eye(3)), _t(np.ones((4, 1, 3, 2))), upper=True)], [((4, 1, 3, 2), "float64")]),
]


@pytest.mark.parametrize("call, expected", SHAPES)
def test_shapes_and_dtypes_match_torch(call, expected):
    outs = call()
    assert [(tuple(o.shape), str(o.dtype)) for o in outs] == expected


def test_float32_values_match_float64_ones():
    A = _t(SPD32, grad=False, dtype=np.float32)
    np.testing.assert_allclose(L.cholesky(A).numpy(), np.linalg.cholesky(SPD32.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(L.matrix_exp(A / 8).numpy(), L.matrix_exp(_t(SPD32, grad=False) / 8).numpy(), rtol=1e-5)


def test_cholesky_reads_one_triangle_as_torch():
    # torch: cholesky([[4, 100], [2, 3]]) = [[2, 0], [1, 1.4142]] (lower read);
    # cholesky([[4, 2], [100, 3]], upper=True) = [[2, 1], [0, 1.4142]] (upper read)
    np.testing.assert_allclose(L.cholesky(_t([[4.0, 100.0], [2.0, 3.0]])).detach().numpy(),
                               [[2.0, 0.0], [1.0, math.sqrt(2)]])
    np.testing.assert_allclose(L.cholesky(_t([[4.0, 2.0], [100.0, 3.0]]), upper=True).detach().numpy(),
                               [[2.0, 1.0], [0.0, math.sqrt(2)]])


def test_eigh_reads_the_triangle_uplo_names():
    # torch: eigvalsh([[1, 100], [2, 3]]) = [-0.2361, 4.2361]; with UPLO="U" [-98.0050, 102.0050]
    m = _t([[1.0, 100.0], [2.0, 3.0]])
    np.testing.assert_allclose(L.eigvalsh(m).detach().numpy(), [-0.2360679775, 4.2360679775])
    np.testing.assert_allclose(L.eigvalsh(m, UPLO="U").detach().numpy(), [-98.0049998750, 102.0049998750])


@pytest.mark.parametrize("fn, m", [(L.eigvalsh, np.diag([1.0, 1.0, 2.0])), (L.svdvals, np.eye(3))])
def test_values_only_gradient_is_finite_at_repeated_values(fn, m):
    # torch: the identity for both (no division by the gaps between repeated values)
    A = _t(m)
    fn(A).sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), np.eye(3))


def test_gauge_invariant_gradients_agree_whatever_the_vectors_signs():
    # V diag(w) V^T is A itself, whatever the eigenvectors' signs: its gradient is the cotangent
    # (symmetrised), as torch's; likewise U diag(S) Vh for the SVD.
    rng = np.random.default_rng(3)
    g = rng.standard_normal((3, 3))
    A = _t(np.array(A3))
    w, v = L.eigh(A)
    ((v * w.unsqueeze(-2)) @ v.mT * ag.tensor(g)).sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), (g + g.T) / 2, atol=1e-12)
    B = _t(R32)
    u, s, vh = L.svd(B, full_matrices=False)
    ((u * s.unsqueeze(-2)) @ vh * ag.tensor(g[:, :2])).sum().backward()
    np.testing.assert_allclose(B.grad.numpy(), g[:, :2], atol=1e-12)


def test_svd_full_matrices_gradient_ignores_the_extra_vectors():
    # torch narrows U and Vh to their first min(m, n) vectors before svd_backward: a function
    # of the extra columns gets no gradient, without an error (also when m != n)
    B = _t(R32)
    u, s, vh = L.svd(B)
    (u[:, 2:] ** 2).sum().backward()
    np.testing.assert_allclose(B.grad.numpy(), np.zeros((3, 2)))


def test_pinv_of_a_rank_deficient_matrix_and_its_gradient():
    # torch: pinv([[1, 2], [2, 4]]) = [[0.04, 0.08], [0.08, 0.16]], the gradient of its sum
    # [[0.0048, -0.0144], [-0.0144, -0.0768]] (pinv_backward, finite at lower rank)
    A = _t([[1.0, 2.0], [2.0, 4.0]])
    p = L.pinv(A)
    np.testing.assert_allclose(p.detach().numpy(), [[0.04, 0.08], [0.08, 0.16]], atol=1e-12)
    p.sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), [[0.0048, -0.0144], [-0.0144, -0.0768]], atol=1e-12)


def test_matrix_power_zero_is_the_identity():
    # torch: matrix_power([[2, 1], [0, 3]], 0) = eye(2)
    np.testing.assert_array_equal(L.matrix_power(_t([[2.0, 1.0], [0.0, 3.0]]), 0).numpy(), np.eye(2))


def test_solve_triangular_with_a_zero_on_the_diagonal_gives_torchs_inf_and_nan():
    # torch: [[inf, -inf], [0, 1]] and, solving X A = I with A = [[1, 0], [1, 0]] lower,
    # [[nan, nan], [-inf, inf]]; no error
    x = L.solve_triangular(_t([[0.0, 1.0], [0.0, 1.0]]), _t(np.eye(2)), upper=True)
    np.testing.assert_array_equal(x.detach().numpy(), [[np.inf, -np.inf], [0.0, 1.0]])
    x = L.solve_triangular(_t([[1.0, 0.0], [1.0, 0.0]]), _t(np.eye(2)), upper=False, left=False)
    np.testing.assert_array_equal(x.detach().numpy(), [[np.nan, np.nan], [-np.inf, np.inf]])


NOT_PD = "The factorization could not be completed because the input is not positive-definite"
LONG = ag.tensor(np.zeros((3, 3), dtype=np.int64))

# call, torch 2.13's message (torch._C._LinAlgError for a non positive-definite input, a
# RuntimeError)
ERRORS = [
    (lambda: L.cholesky(_t([[1.0, 2.0], [2.0, 1.0]])),
     f"linalg.cholesky: {NOT_PD} (the leading minor of order 2 is not positive-definite)."),
    (lambda: L.cholesky(_t([[-1.0, 0.0], [0.0, 1.0]])),
     f"linalg.cholesky: {NOT_PD} (the leading minor of order 1 is not positive-definite)."),
    (lambda: L.cholesky(_t([np.eye(2), [[1.0, 2.0], [2.0, 1.0]]])),
     f"linalg.cholesky: (Batch element 1): {NOT_PD} (the leading minor of order 2 is not "
     "positive-definite)."),
    (lambda: L.cholesky(_t([[1.0, 2.0], [2.0, 1.0]]), upper=True),
     f"linalg.cholesky: {NOT_PD} (the leading minor of order 2 is not positive-definite)."),
    (lambda: L.cholesky(_t(np.zeros((2, 3)))),
     "linalg.cholesky: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: L.cholesky(_t(np.zeros(3))),
     "linalg.cholesky: The input tensor A must have at least 2 dimensions."),
    (lambda: L.cholesky(LONG), "linalg.cholesky: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: L.solve_triangular(_t(T3), _t(T3[0]), upper=True),
     "linalg.solve_triangular: The input tensor B must have at least 2 dimensions."),
    (lambda: L.solve_triangular(_t(T3[:2]), _t(T3), upper=True),
     "linalg.solve_triangular: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: L.solve_triangular(_t(T3), _t(T3[:2]), upper=True),
     "linalg.solve_triangular: Incompatible shapes of A and B for the equation AX = B (3x3 and 2x3)"),
    (lambda: L.solve_triangular(_t(T3), _t(np.ones((3, 2))), upper=True, left=False),
     "linalg.solve_triangular: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x2)"),
    (lambda: L.qr(_t(np.zeros(3))), "linalg.qr: The input tensor A must have at least 2 dimensions."),
    (lambda: L.qr(_t(A3), mode="x"),
     "qr received unrecognized mode 'x' but expected one of 'reduced' (default), 'r', or 'complete'"),
    (lambda: L.qr(LONG), "linalg.qr: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: L.qr(_t(A3), mode="r").R.sum().backward(),
     "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
     "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."),
    (lambda: L.qr(_t(R32), mode="complete").Q.sum().backward(),
     "The QR decomposition is not differentiable when mode='complete' and nrows > ncols."),
    (lambda: L.eigh(_t(np.zeros((2, 3)))),
     "linalg.eigh: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: L.eigh(_t(np.zeros(3))), "linalg.eigh: The input tensor A must have at least 2 dimensions."),
    (lambda: L.eigvalsh(_t(np.zeros(3))), "linalg.eigh: The input tensor A must have at least 2 dimensions."),
    (lambda: L.eigh(_t(A3), UPLO="X"), "Expected UPLO argument to be 'L' or 'U', but got X"),
    (lambda: L.svd(_t(np.zeros(3))), "linalg.svd: The input tensor A must have at least 2 dimensions."),
    (lambda: L.svdvals(_t(np.zeros(3))), "linalg.svd: The input tensor A must have at least 2 dimensions."),
    (lambda: L.svdvals(LONG), "linalg.svd: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: L.pinv(_t(np.zeros(3))),
     "linalg.pinv(Double{[3]}): expected a tensor with 2 or more dimensions of float, double, cfloat "
     "or cdouble types"),
    (lambda: L.pinv(_t(np.zeros((2, 3))), hermitian=True),
     "linalg.eigh: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: L.matrix_power(_t(np.zeros((2, 3))), 2),
     "linalg.matrix_power: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: L.matrix_power(_t(np.zeros(3)), 2),
     "linalg.matrix_power: The input tensor A must have at least 2 dimensions."),
    (lambda: L.matrix_power(_t(np.zeros((2, 2))), -1),
     "linalg.inv: The diagonal element 1 is zero, the inversion could not be completed because the "
     "input matrix is singular."),
    (lambda: L.matrix_exp(_t(np.zeros((2, 3)))),
     "linalg.matrix_exp: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: L.matrix_exp(_t(np.zeros(3))),
     "linalg.matrix_exp: The input tensor A must have at least 2 dimensions."),
    (lambda: L.matrix_exp(LONG),
     "linalg.matrix_exp: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: L.matrix_norm(_t(R32), ord=3), "linalg.matrix_norm: Order 3 not supported."),
    (lambda: L.matrix_norm(_t(R32), ord="abc"), "linalg.matrix_norm: Order abc not supported."),
    (lambda: L.matrix_norm(_t(R32[0])),
     "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."),
    (lambda: L.matrix_norm(_t(R32), dim=(0, 0)), "linalg.matrix_norm: dims must be different. Got (0, 0)"),
    (lambda: L.norm(_t(np.zeros((2, 3, 4))), ord=2),
     "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."),
]


@pytest.mark.parametrize("call, message", ERRORS)
def test_errors_match_torch(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value) == message


def test_linalg_norm_picks_vector_or_matrix_norms_as_torch():
    # torch: norm([3, 4], ord=1) = 7; norm([[3, 4]], dim=1) = [5]; norm(R32, ord=2) = 9.5255
    # (spectral); norm(R32) = 9.5394 (all entries)
    assert L.norm(_t([3.0, 4.0]), ord=1).item() == 7.0
    np.testing.assert_allclose(L.norm(_t([[3.0, 4.0]]), dim=1).detach().numpy(), [5.0])
    assert L.norm(_t(R32), ord=2).item() == pytest.approx(9.5255180916)
    assert L.norm(_t(R32)).item() == pytest.approx(9.5393920142)


def test_linalg_namespace_has_every_function():
    for name in ["cholesky", "solve_triangular", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv",
                 "matrix_power", "matrix_exp", "matrix_norm", "norm"]:
        assert callable(getattr(L, name)), name
    for name in ["svd", "qr", "pinverse", "matrix_power", "matrix_exp", "cholesky_solve"]:
        assert callable(getattr(ag, name)) and callable(getattr(ag.Tensor, name)), name


@pytest.mark.parametrize("scale", [0.01, 1.0, 30.0, 300.0])
def test_matrix_exp_off_the_cpu_path_matches_scipy(scale):
    # CuPy has no expm: the Pade [13/13] approximant with scaling and squaring used there
    # (decompositions._pade13), run here on NumPy arrays, against scipy.linalg.expm; scale
    # 30 and 300 need squarings
    from scipy.linalg import expm

    from gradtrace.autograd.ops.decompositions import _pade13
    a = np.random.default_rng(1).standard_normal((2, 4, 4)) * scale / 4
    np.testing.assert_allclose(_pade13(np, a), expm(a), rtol=1e-10, atol=1e-300)


LS_A = [[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]]
LS_B = [[1.0], [2.0], [4.0]]


# driver, torch's (residuals, rank, singular_values) for LS_A, LS_B (solution [[1/14], [0.5]]
# for every driver)
LSTSQ_DRIVERS = [
    (None, [], 2, []),
    ("gelsy", [], 2, []),
    ("gelsd", [0.0714285714], 2, [10.1914282571, 0.3671376859]),
    ("gelss", [0.0714285714], 2, [10.1914282571, 0.3671376859]),
    ("gels", [0.0714285714], [], []),
]


@pytest.mark.parametrize("driver, residuals, rank, svals", LSTSQ_DRIVERS)
def test_lstsq_outputs_per_driver_match_torch(driver, residuals, rank, svals):
    out = L.lstsq(_t(LS_A), _t(LS_B), driver=driver)
    np.testing.assert_allclose(out.solution.detach().numpy(), [[1 / 14], [0.5]], atol=1e-12)
    np.testing.assert_allclose(out.residuals.detach().numpy(), residuals, atol=1e-9)
    np.testing.assert_array_equal(out.rank.numpy(), rank)
    assert out.rank.dtype == np.int64
    np.testing.assert_allclose(out.singular_values.numpy(), svals, atol=1e-6)


def test_lstsq_gradients_and_rank_deficient_solution_match_torch():
    # torch: d(solution.sum())/dA = [[-0.0612, 0.3571], [-0.3265, 0.0714], [0.1939, -0.2143]],
    # /dB = [[-4/7], [2/7], [1/7]]; residuals (gelsd) require grad; a rank-1 A gives the
    # minimum-norm solution [[0.2429], [0.4857]] and rank 1
    A, B = _t(LS_A), _t(LS_B)
    L.lstsq(A, B).solution.sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), [[-0.0612244898, 0.3571428571], [-0.3265306122, 0.0714285714],
                                                [0.1938775510, -0.2142857143]], atol=1e-9)
    np.testing.assert_allclose(B.grad.numpy(), [[-4 / 7], [2 / 7], [1 / 7]], atol=1e-12)
    assert L.lstsq(A, B, driver="gelsd").residuals.requires_grad
    out = L.lstsq(_t([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]), _t(LS_B))
    np.testing.assert_allclose(out.solution.detach().numpy(), [[0.2428571429], [0.4857142857]], atol=1e-9)
    assert out.rank.item() == 1


@pytest.mark.parametrize("call, message", [
    (lambda: L.lstsq(_t(LS_A), _t(LS_B[:2])), "torch.linalg.lstsq: input.size(-2) should match other.size(-2)"),
    (lambda: L.lstsq(_t(LS_A[0]), _t(LS_B)), "torch.linalg.lstsq: input must have at least 2 dimensions."),
    (lambda: L.lstsq(_t(LS_A), _t(LS_B), driver="x"),
     "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"),
    (lambda: L.lstsq(_t(LS_A), _t(LS_B, dtype=np.float32)),
     "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype Double and "
     "other's dtype Float"),
])
def test_lstsq_errors_match_torch(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value) == message


def test_decomposition_nodes_replay_compiled_bit_identical():
    """Compiled autograd replays the decompositions' nodes (several outputs, some without a
    gradient) with the eager gradients, bit for bit."""
    rng = np.random.default_rng(5)
    a = ag.tensor(rng.standard_normal((2, 4, 3)), requires_grad=True)
    s = ag.tensor(rng.standard_normal((3, 3)), requires_grad=True)

    def build():
        spd = s @ s.mT + ag.tensor(3.0 * np.eye(3))
        w, v = L.eigh(spd)
        u, sv, vh = L.svd(a, full_matrices=False)
        parts = [L.cholesky(spd), L.qr(a).Q, L.qr(a).R, w, v * v, L.eigvalsh(spd), u * u, sv,
                 L.svdvals(a), L.pinv(a), L.matrix_exp(s / 4), L.solve_triangular(spd, a[0].mT, upper=True),
                 ag.cholesky_solve(a[1].mT, L.cholesky(spd)), L.lstsq(a, a[..., :1]).solution]
        return ag.cat([p.reshape(-1) for p in parts]).square().sum()

    def grads():
        a.grad = s.grad = None
        build().backward()
        return [a.grad.numpy().copy(), s.grad.numpy().copy()]

    stats = compiled_replay_stats(grads)
    assert stats["captures"] >= 1 and stats["eager_fallbacks"] == 0


# matrix, torch's matrix_rank: default, atol=1, hermitian (square only: the lower triangle is
# read, so the non-symmetric rank-2 matrix counts 3), rtol=0.5
MATRIX_RANKS = [
    (R32, 2, 1, None, 1),
    ([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], 2, 2, 3, 1),
    ([[[0.0, 0], [0, 0]], [[1, 0], [0, 1e-20]]], [0, 1], [0, 0], [0, 1], [0, 1]),
]


@pytest.mark.parametrize("m, rank, rank_atol1, rank_hermitian, rank_rtol", MATRIX_RANKS)
def test_matrix_rank_matches_torch(m, rank, rank_atol1, rank_hermitian, rank_rtol):
    A = _t(m)
    assert L.matrix_rank(A).tolist() == rank
    assert L.matrix_rank(A).dtype == np.int64
    assert L.matrix_rank(A, atol=1.0).tolist() == rank_atol1
    assert L.matrix_rank(A, rtol=0.5).tolist() == rank_rtol
    if rank_hermitian is not None:
        assert L.matrix_rank(A, hermitian=True).tolist() == rank_hermitian
