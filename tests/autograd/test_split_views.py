"""split, split_with_sizes, chunk and unbind: several views of the input under one multi-output
node, as PyTorch makes them. The expected values are what torch 2.13 gives for the same calls
(gradients are checked against finite differences in tests/autograd/op_cases.py)."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import compiled_autograd as ca
from gradtrace.autograd import nn, views
from gradtrace.autograd.nn import functional as F

_MULTI = (" This view is the output of a function that returns multiple views. Such functions do "
          "not allow the output views to be modified inplace. You should replace the inplace "
          "operation by an out-of-place one.")


def _y(shape=(6, 4)):
    """A non-leaf tensor that requires grad (its views get a grad_fn)."""
    x = ag.tensor(np.arange(float(np.prod(shape))).reshape(shape), requires_grad=True)
    return x, x * 1.0


# call, node name (torch 2.13: type(piece.grad_fn).__name__), number of pieces, piece shapes
SPLITS = [
    (lambda y: y.split(2), "SplitBackward0", [(2, 4)] * 3),
    (lambda y: y.split(4, -1), "SplitBackward0", [(6, 4)]),
    (lambda y: y.split([1, 5]), "SplitWithSizesBackward0", [(1, 4), (5, 4)]),
    (lambda y: ag.split_with_sizes(y, [2, 0, 2], 1), "SplitWithSizesBackward0", [(6, 2), (6, 0), (6, 2)]),
    (lambda y: y.chunk(3, -1), "SplitBackward0", [(6, 2), (6, 2)]),          # ceil(4/3)=2: 2 pieces
    (lambda y: y.chunk(4, 0), "SplitBackward0", [(2, 4), (2, 4), (2, 4)]),
    (lambda y: y.unbind(1), "UnbindBackward0", [(6,)] * 4),
    (lambda y: y[:1].unbind(0), "UnbindBackward0", [(4,)]),
]


@pytest.mark.parametrize("call,name,shapes", SPLITS)
def test_pieces_are_views_under_one_node(call, name, shapes):
    _, y = _y()
    pieces = call(y)
    assert [tuple(p.shape) for p in pieces] == shapes
    fn = pieces[0].grad_fn
    assert type(fn).__name__ == name
    assert all(p.grad_fn is fn for p in pieces)
    assert [p._output_nr for p in pieces] == list(range(len(pieces)))
    assert len(fn.input_metadata) == len(pieces)
    for p in pieces:
        assert p._base is y and p._vc is y._vc and np.shares_memory(p._data, y._data) == bool(p.numel())
    y.detach().add_(1.0)      # the version counter is shared: every piece sees the write
    assert all(p._version == y._version == 1 for p in pieces)


def test_narrow_and_tensor_split_pieces_are_slices():
    # torch: narrow and tensor_split make one SliceBackward0 per piece, each output_nr 0.
    _, y = _y()
    assert type(y.narrow(0, 1, 2).grad_fn).__name__ == "SliceBackward0"
    pieces = y.tensor_split(3, 1)
    assert [type(p.grad_fn).__name__ for p in pieces] == ["SliceBackward0"] * 3
    assert len({id(p.grad_fn) for p in pieces}) == 3 and all(p._output_nr == 0 for p in pieces)


def test_backward_joins_gradients_with_zeros_for_unused_pieces():
    x, y = _y((6, 2))
    a, b, c = y.chunk(3)
    (a * 2.0).sum().backward()        # torch: [[2, 2], [2, 2], [0, 0], ...]
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 2]] * 2 + [[0, 0]] * 4)
    x, y = _y((2, 3))
    u = y.unbind(1)
    (u[2] * 3.0).sum().backward()     # torch: [[0, 0, 3], [0, 0, 3]]
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 3], [0, 0, 3]])


def test_backward_is_one_node_call_with_the_input_gradient_in_one_array():
    # All pieces' gradients arrive at the one node; it gives one gradient for its input.
    x, y = _y()
    q, k, v = y.chunk(3, 0)
    fn = q.grad_fn
    seen = []
    fn.register_hook(lambda grad_inputs, grad_outputs: seen.append((grad_inputs, grad_outputs)))
    (q * 1.0 + k * 2.0).sum().backward()
    (grad_inputs, grad_outputs), = seen
    # v got no gradient: None reaches the hook (torch: None), zeros are filled only inside.
    assert len(grad_outputs) == 3 and grad_outputs[2] is None
    assert grad_inputs[0].shape == (6, 4)
    np.testing.assert_array_equal(x.grad.numpy(), [[1] * 4] * 2 + [[2] * 4] * 2 + [[0] * 4] * 2)


def test_double_backward_through_split():
    # torch: the gradient's grad_fn is CatBackward0; d/dx of sum(2 a) is 0 for every element.
    x = ag.tensor(np.arange(6.0), requires_grad=True)
    a, _b, _c = x.split(2)
    g, = ag.grad((a * a).sum(), x, create_graph=True)
    assert type(g.grad_fn).__name__ == "CatBackward0"
    np.testing.assert_array_equal(g.detach().numpy(), [0, 2, 0, 0, 0, 0])
    gg, = ag.grad(g.sum(), x)
    np.testing.assert_array_equal(gg.numpy(), [2, 2, 0, 0, 0, 0])


def test_forward_mode_tangents_are_pieces_of_the_tangent():
    import gradtrace.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        d = fwAD.make_dual(ag.zeros(6, dtype=ag.float64), ag.arange(6.0))
        _a, b = d.split([2, 4])
        # torch: tensor([2., 3., 4., 5.]) and the unbound tangents 0., 1., ...
        np.testing.assert_array_equal(fwAD.unpack_dual(b).tangent.numpy(), [2, 3, 4, 5])
        assert [float(fwAD.unpack_dual(t).tangent) for t in d.unbind()] == [0, 1, 2, 3, 4, 5]


# --------------------------------------------------------------------------- in-place on a piece


@pytest.mark.parametrize("call,name", [
    (lambda y: y.split(3), "Split"),
    (lambda y: y.split([2, 4]), "SplitWithSizes"),
    (lambda y: y.chunk(2), "Split"),
    (lambda y: y.unbind(), "Unbind"),
    (lambda y: (y.chunk(2)[0].reshape(3),), "View"),     # a view of a piece inherits it
])
def test_inplace_on_a_piece_raises_pytorchs_error(call, name):
    _, y = _y((6,))
    piece = call(y)[0]
    # torch 2.13's words, e.g. "Output 0 of Split is a view and is being modified inplace. ..."
    with pytest.raises(RuntimeError) as err:
        piece.mul_(2.0)
    assert str(err.value).endswith(f"Output 0 of {name} is a view and is being modified inplace." + _MULTI)
    assert y._version == 0


def test_inplace_on_a_piece_of_a_leaf_raises_the_multi_output_error():
    # torch: the multi-output error, not the leaf-view one.
    x = ag.tensor(np.arange(4.0), requires_grad=True)
    with pytest.raises(RuntimeError, match="Output 0 of Split is a view and is being modified"):
        x.split(2)[0].mul_(2.0)


def test_inplace_with_a_grad_operand_on_a_piece_of_a_tensor_without_grad():
    # torch: "A view was created in no_grad mode and is being modified inplace with grad mode
    # enabled." followed by the multi-output advice (the piece has no grad_fn).
    p = ag.tensor(np.arange(6.0))
    w = ag.tensor(np.ones(3), requires_grad=True)
    a, _b = p.split(3)
    with pytest.raises(RuntimeError) as err:
        a.mul_(w)
    assert str(err.value).endswith("A view was created in no_grad mode and is being modified "
                                   "inplace with grad mode enabled." + _MULTI)


def test_inplace_allowed_without_grad_and_then_grad_fn_refuses():
    # Nothing needs grad: allowed (torch: the base changes, version 1).
    p = ag.tensor(np.arange(6.0))
    a, _b = p.split(3)
    a.mul_(2.0)
    np.testing.assert_array_equal(p.numpy(), [0, 2, 4, 3, 4, 5])
    # Under no_grad: allowed; afterwards torch refuses to rebuild any piece's grad_fn.
    _, y = _y((6,))
    a, b = y.split(3)
    with ag.no_grad():
        a.mul_(2.0)
    assert y._version == 1
    for i, piece in enumerate((a, b)):
        with pytest.raises(RuntimeError) as err:
            piece.grad_fn   # noqa: B018 - reading it is the check
        assert str(err.value) == (f"Output {i} of Split is a view and its base or another view "
                                  "of its base has been modified inplace." + _MULTI)
    with pytest.raises(RuntimeError, match="Output 0 of Split is a view and its base"):
        a * 1.0
    # A detached piece is no view of a multi-output node: allowed (torch too).
    _, y = _y((6,))
    d = y.split(3)[0].detach()
    d.mul_(2.0)
    assert y._version == 1


# --------------------------------------------------------------------------- compiled autograd


def _bit_identical(build, params):
    eager = []
    for _ in range(2):
        for p in params:
            p.grad = None
        build().backward()
        eager.append([p.grad.numpy().copy() for p in params])
    ca.reset()
    with ca.enable():
        for step in range(2):
            for p in params:
                p.grad = None
            build().backward()
            for e, p in zip(eager[step], params):
                np.testing.assert_array_equal(e, p.grad.numpy())
    assert ca.stats()["hits"] == 1
    ca.reset()


def test_compiled_autograd_replays_split_nodes_bit_for_bit():
    rng = np.random.default_rng(0)
    x = ag.tensor(rng.standard_normal((4, 9)).astype(np.float32), requires_grad=True)
    w = ag.tensor(rng.standard_normal((9, 9)).astype(np.float32), requires_grad=True)

    def build():
        h = x @ w
        q, k, v = h.chunk(3, -1)           # all used
        a, _unused, c = h.split([2, 3, 4], 1)   # one piece without a gradient
        rows = h.unbind(0)
        return (q * k - v).sum() + (a.sum() * c.sum()) + (rows[1] * rows[3]).sum()

    _bit_identical(build, [x, w])


def test_attention_uses_one_split_node_per_chunk():
    ag.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32))
    out, _ = mha(x, x, x)
    names = []
    stack, seen = [out.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        names.append(fn.name())
        stack.extend(e[0] for e in fn.next_edges if e is not None)
    assert "SplitBackward0" in names and "IndexBackward0" not in names
    F.mse_loss(out, ag.zeros_like(out)).backward()
    assert all(p.grad is not None for p in mha.parameters())


# --------------------------------------------------------------------------- sizes and errors


@pytest.mark.parametrize("shape,call,shapes", [
    ((0, 2), lambda y: y.chunk(3), [(0, 2)] * 3),        # torch: chunks empty pieces
    ((0,), lambda y: y.split(2), [(0,)]),                 # torch: one empty piece
    ((0,), lambda y: y.split(0), [(0,)]),
    ((5,), lambda y: y.chunk(3), [(2,), (2,), (1,)]),
    ((5,), lambda y: y.split([0, 5]), [(0,), (5,)]),
    ((2, 0), lambda y: y.split(0, 1), [(2, 0)]),
    ((0, 3), lambda y: y.unbind(0), []),
])
def test_piece_shapes_match_torch(shape, call, shapes):
    y = ag.zeros(shape, requires_grad=True) * 1.0
    assert [tuple(p.shape) for p in call(y)] == shapes


@pytest.mark.parametrize("call,error,message", [
    (lambda x: x.split([1, 2]), RuntimeError, "split_with_sizes expects split_sizes to sum exactly "
     "to 6 (input tensor's size at dimension 0), but got split_sizes=[1, 2]"),
    (lambda x: x.split(-1), RuntimeError, "split expects split_size be non-negative, but got "
     "split_size=-1"),
    (lambda x: x.split(0), RuntimeError, "split_size can only be 0 if dimension size is 0, but got "
     "dimension size of 6"),
    (lambda x: x.split_with_sizes([7, -1]), RuntimeError, "split_with_sizes expects split_sizes "
     "have only non-negative entries, but got split_sizes=[7, -1]"),
    (lambda x: x.chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
])
def test_errors_in_torchs_words(call, error, message):
    with pytest.raises(error) as err:
        call(ag.zeros((6, 4)))
    assert str(err.value) == message


def test_a_view_of_a_restricted_view_inherits_the_restriction():
    # torch: b = a[1:] of a view a made under no_grad may not be modified in place with grad
    # mode on ("... created in no_grad mode and is being modified inplace with grad mode
    # enabled."; torch words it "Output 0 of Slice is a view of a view which was ..." because
    # its no_grad view requires grad and so b has a grad_fn).
    _, z = _y((6,))
    with ag.no_grad():
        a = z[1:]
    b = a[1:]
    with pytest.raises(RuntimeError, match="created in no_grad mode and is being modified inplace"):
        b.mul_(2.0)
    assert z._version == 0


@pytest.mark.parametrize("meta,fn_name,rebased,text", [
    # the texts torch 2.13 raises (handle_view_on_rebase)
    (views.MULTI_OUTPUT_NODE, "UnbindBackward0", False,
     "Output 2 of Unbind is a view and is being modified inplace." + _MULTI),
    (views.MULTI_OUTPUT_NODE, None, False,
     "A view was created in no_grad mode and is being modified inplace with grad mode enabled." + _MULTI),
    (views.NO_GRAD_MODE, "SliceBackward0", False,
     "Output 2 of Slice is a view of a view which was created in no_grad mode and is being "
     "modified inplace with grad mode enabled." + views._NO_GRAD_ADVICE),
    (views.NO_GRAD_MODE, None, True, views.ERR_NO_GRAD_VIEW_REBASED),
])
def test_inplace_view_error_texts(meta, fn_name, rebased, text):
    assert views.inplace_view_error(meta, fn_name, 2, rebased) == text
    assert views.ERR_NO_GRAD_VIEW_REBASED.startswith(
        "A view was created in no_grad mode and its base or another view of its base has been "
        "modified inplace with grad mode enabled. Given that")
