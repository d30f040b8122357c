"""torch.linalg's square-matrix functions (inv, det, slogdet, solve) against PyTorch 2.13 (CPU,
float64): node names, values, gradients at invertible, singular and rank-deficient matrices,
and the error messages. Every expected value is what torch gave for the same call."""
import numpy as np
import pytest

import gradtrace.autograd as ag

A3 = [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]   # det 18


def _t(m, grad=True):
    return ag.tensor(np.array(m, dtype=np.float64), requires_grad=grad)


# expression on A (A3), torch's grad_fn.name()
NODES = [
    ("ag.linalg.inv(A)", "LinalgInvExBackward0"),
    ("ag.inverse(A)", "LinalgInvExBackward0"),
    ("A.inverse()", "LinalgInvExBackward0"),
    ("ag.linalg.det(A)", "LinalgDetBackward0"),
    ("ag.det(A)", "LinalgDetBackward0"),
    ("A.det()", "LinalgDetBackward0"),
    ("ag.linalg.slogdet(A).logabsdet", "LinalgSlogdetBackward0"),
    ("ag.slogdet(A).sign", "LinalgSlogdetBackward0"),
    ("A.slogdet()[1]", "LinalgSlogdetBackward0"),
    ("ag.linalg.solve(A, A[0])", "LinalgSolveExBackward0"),
]


@pytest.mark.parametrize("expr, name", NODES)
def test_node_names_match_torch(expr, name):
    out = eval(expr, {"ag": ag, "A": _t(A3)})  # noqa: S307 - the table's expressions
    assert out.grad_fn.name() == name


# function of A, torch's value, torch's gradient of the value's sum
VALUES = [
    ("inv", lambda A: ag.linalg.inv(A), None,
     [[-0.1975308642, -0.049382716, -0.0987654321], [-0.049382716, -0.012345679, -0.024691358],
      [-0.0987654321, -0.024691358, -0.049382716]]),
    ("det", lambda A: ag.linalg.det(A), 18.0,
     [[11.0, -4.0, 1.0], [-4.0, 8.0, -2.0], [1.0, -2.0, 5.0]]),
    ("slogdet.logabsdet", lambda A: ag.linalg.slogdet(A).logabsdet, 2.8903717578961645,
     [[0.6111111111, -0.2222222222, 0.0555555556], [-0.2222222222, 0.4444444444, -0.1111111111],
      [0.0555555556, -0.1111111111, 0.2777777778]]),
    ("solve", lambda A: ag.linalg.solve(A, ag.tensor(np.array([1.0, 2.0, 3.0]))),
     [1 / 3, 1 / 3, 2 / 3],
     [[-0.1481481481, -0.1481481481, -0.2962962963], [-0.037037037, -0.037037037, -0.0740740741],
      [-0.0740740741, -0.0740740741, -0.1481481481]]),
]


@pytest.mark.parametrize("name, fn, value, grad", VALUES, ids=[v[0] for v in VALUES])
def test_values_and_gradients_match_torch(name, fn, value, grad):
    A = _t(A3)
    out = fn(A)
    if value is not None:
        np.testing.assert_allclose(out.detach().numpy(), value, rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), grad, atol=1e-9)


# det's gradient at singular matrices: the cofactor matrix (the adjugate's transpose), which
# is what torch 2.13 gives under create_graph=True (its SVD formula). NOTE: torch's plain
# backward gives all zeros at these exactly singular inputs (its LU path scales by det = 0);
# here both give the cofactor matrix, the true derivative (det is a polynomial).
SINGULAR_DET = [
    ("rank1_2x2", [[1.0, 2.0], [2.0, 4.0]], [[4.0, -2.0], [-2.0, 1.0]]),
    ("rank2_diag", [[1.0, 0, 0], [0, 2, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], [0, 0, 2.0]]),
    ("rank1_3x3_is_zero", [[1.0, 0, 0], [0, 0, 0], [0, 0, 0]], np.zeros((3, 3))),
    ("rank2_123", [[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], [[-3.0, 6, -3], [6, -12, 6], [-3, 6, -3]]),
    ("rank2_dense", [[2.0, 1, 1], [1, 3, 2], [3, 4, 3]], [[1.0, 3, -5], [1, 3, -5], [-1, -3, 5]]),
]


@pytest.mark.parametrize("name, m, cofactor", SINGULAR_DET, ids=[s[0] for s in SINGULAR_DET])
@pytest.mark.parametrize("create_graph", [False, True])
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(name, m, cofactor, create_graph):
    A = _t(m)
    (g,) = ag.grad(ag.linalg.det(A), A, create_graph=create_graph)
    assert g.requires_grad == create_graph   # torch: a gradient with a graph under create_graph
    np.testing.assert_allclose(g.detach().numpy(), cofactor, atol=1e-9)


def test_det_gradient_in_a_batch_with_one_singular_matrix():
    A = _t([A3, [[1.0, 2, 3], [4, 5, 6], [7, 8, 9]]])
    ag.linalg.det(A).sum().backward()
    np.testing.assert_allclose(A.grad.numpy()[0], VALUES[1][3], atol=1e-9)
    np.testing.assert_allclose(A.grad.numpy()[1], SINGULAR_DET[3][2], atol=1e-9)


def test_slogdet_of_a_negative_determinant():
    # torch: sign=-1., logabsdet=0.
    sign, logabsdet = ag.linalg.slogdet(_t([[0.0, 1.0], [1.0, 0.0]]))
    assert (sign.item(), logabsdet.item()) == (-1.0, 0.0)


@pytest.mark.parametrize("m", [[[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], [[1.0, 2], [2, 4]]])
def test_slogdet_gradient_at_a_singular_matrix_is_not_finite(m):
    # torch: sign 0, logabsdet -inf, and a gradient with no finite entry (for the 3x3
    # [[nan, nan, nan], [inf, -inf, inf], [-inf, inf, -inf]], from its LU solve), no error
    A = _t(m)
    sign, logabsdet = ag.linalg.slogdet(A)
    assert (sign.item(), logabsdet.item()) == (0.0, -np.inf)
    logabsdet.backward()
    assert not np.isfinite(A.grad.numpy()).any()


def test_solve_shapes_follow_torchs_vector_rule():
    # torch: A (2,3,3) with B (2,3) -> (2,3), (3,) -> (2,3), (3,2) -> (2,3,2); left=False with
    # B (2,3) and A (3,3) -> (2,3); A (2,3,3) with B (4,1,3,2) -> (4,2,3,2)
    A = ag.tensor(np.random.default_rng(0).standard_normal((2, 3, 3)) + 4 * np.eye(3))
    for b_shape, out_shape in [((2, 3), (2, 3)), ((3,), (2, 3)), ((3, 2), (2, 3, 2))]:
        assert tuple(ag.linalg.solve(A, ag.tensor(np.ones(b_shape))).shape) == out_shape
    assert tuple(ag.linalg.solve(A[0], ag.tensor(np.ones((2, 3))), left=False).shape) == (2, 3)
    assert tuple(ag.linalg.solve(A, ag.tensor(np.ones((4, 1, 3, 2)))).shape) == (4, 2, 3, 2)


SINGULAR = [[1.0, 2.0], [2.0, 4.0]]

# call, torch 2.13's message (singular inputs: torch._C._LinAlgError, a RuntimeError)
ERRORS = [
    (lambda: ag.linalg.inv(_t(SINGULAR)),
     "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because "
     "the input matrix is singular."),
    (lambda: ag.linalg.inv(_t(np.zeros((2, 2, 2)))),
     "linalg.inv: (Batch element 0): The diagonal element 1 is zero, the inversion could not be "
     "completed because the input matrix is singular."),
    (lambda: ag.linalg.inv(_t([np.eye(2), np.zeros((2, 2))])),
     "linalg.inv: (Batch element 1): The diagonal element 1 is zero, the inversion could not be "
     "completed because the input matrix is singular."),
    (lambda: ag.linalg.inv(_t(np.zeros((2, 3)))),
     "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: ag.linalg.inv(_t([1.0, 2.0])),
     "linalg.inv: The input tensor A must have at least 2 dimensions."),
    (lambda: ag.linalg.inv(ag.tensor(np.array([[1, 2], [3, 4]]))),
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: ag.linalg.det(_t(np.zeros((2, 3)))),
     "linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: ag.linalg.det(ag.tensor(np.array([[1, 2], [3, 4]]))),
     "linalg.det: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: ag.linalg.slogdet(_t(np.zeros((2, 3)))),
     "linalg.slogdet: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: ag.linalg.solve(_t(SINGULAR), _t([1.0, 1.0])),
     "torch.linalg.solve: The solver failed because the input matrix is singular."),
    (lambda: ag.linalg.solve(_t([np.eye(2), SINGULAR]), _t(np.ones((2, 2)))),
     "torch.linalg.solve: (Batch element 1): The solver failed because the input matrix is "
     "singular."),
    (lambda: ag.linalg.solve(_t(np.eye(3)), _t(np.ones((1, 2)))),
     "linalg.solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 1x2)"),
    (lambda: ag.linalg.solve(_t(np.eye(3)), _t(np.ones(3)), left=False),
     "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x1)"),
    (lambda: ag.linalg.solve(_t(np.eye(3)), _t(np.ones(2)), left=False),
     "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 2x1)"),
    (lambda: ag.linalg.solve(_t(np.ones((2, 3, 3))), _t(np.ones((2, 3))), left=False),
     "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x1)"),
    (lambda: ag.linalg.solve(_t(np.zeros((3, 2))), _t(np.ones(3))),
     "linalg.solve: A must be batches of square matrices, but they are 3 by 2 matrices"),
    (lambda: ag.linalg.solve(ag.tensor(np.eye(2, dtype=np.float32)), _t(np.ones(2))),
     "linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B of "
     "type Double instead"),
]


@pytest.mark.parametrize("call, message", ERRORS)
def test_errors_match_torch(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value) == message


# det's second derivative at singular matrices: the gradient built with create_graph=True (the
# SVD formula, through the SVD op) differentiated again, with weights cos(arange) on the
# gradient's entries; torch 2.13's values. The cofactor matrix is a polynomial, so these are
# also its exact derivative (checked against finite differences of the cofactor matrix).
# NOTE: at rank n-2 or lower (two zero singular values) torch gives NaN (0/0 in its SVD
# backward); here the zero cotangent of U and Vh takes the singular values' path, finite but
# not the exact derivative: neither is, the SVD not being differentiable there.
SINGULAR_DET_HESSIAN = [
    ("rank1_2x2", [[1.0, 2.0], [2.0, 4.0]], [[-0.9899924966, 0.4161468365], [-0.5403023059, 1.0]]),
    ("rank2_diag", [[1.0, 0, 0], [0, 2, 0], [0, 0, 0]],
     [[-0.2910000676, 0.0, -1.9203405733], [0.0, -0.1455000338, -0.7539022543],
      [0.8322936731, -0.2836621855, 1.3463563791]]),
    ("rank2_123", [[1.0, 2, 3], [4, 5, 6], [7, 8, 9]],
     [[-13.4030037666, 17.2385896228, -5.1296770426], [-5.6391886145, 8.8870169621, -3.05144554],
      [7.8508032515, -10.9182270215, 4.1651321489]]),
    ("rank2_dense", [[2.0, 1, 1], [1, 3, 2], [3, 4, 3]],
     [[-5.0398842146, 5.8868046533, -4.1256477294], [-2.3860919756, 2.9972701554, -2.9267273044],
      [3.2663509277, -3.9734637041, 2.142402949]]),
]


@pytest.mark.parametrize("name, m, hessian", SINGULAR_DET_HESSIAN, ids=[s[0] for s in SINGULAR_DET_HESSIAN])
def test_det_second_derivative_at_singular_matrices_matches_torch(name, m, hessian):
    A = _t(m)
    (g,) = ag.grad(ag.linalg.det(A), A, create_graph=True)
    weights = np.cos(np.arange(g.numel())).reshape(tuple(g.shape))
    (h,) = ag.grad((g * ag.tensor(weights)).sum(), A)
    np.testing.assert_allclose(h.numpy(), hessian, atol=1e-8)
