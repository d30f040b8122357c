"""Compiled autograd specializes its program on what replays show (issue 17): a gradient that
conform() had to fit is summed down directly from the next code generation on, with the same
values as the engine's conform (bit for bit on the CPU), and any other shape still reaches
conform()."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import compiled_autograd as ca
from gradtrace.autograd import engine, nn
from gradtrace.autograd.compiled_autograd.codegen import _fold_axes
from gradtrace.autograd.ops.shape import sum_over


@pytest.fixture(autouse=True)
def _fresh_cache():
    ca.reset()
    yield
    ca.reset()


F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

# (shape the rule returned, dtype, shape of the input, its dtype, axes folded in the program)
FOLD_CASES = [
    ((32, 256), F32, (256,), F32, (0,)),          # a Linear's bias (a GEMV with ones)
    ((4, 16, 32), F32, (32,), F32, (0, 1)),       # a LayerNorm's weight
    ((3, 4), F32, (3, 1), F32, (1,)),
    ((2, 3, 4), F32, (1, 3, 1), F32, (0, 2)),
    ((1, 5), F32, (5,), F32, (0,)),
    ((1, 5), F32, (5, 1), F32, None),     # not a broadcast: conform() raises
    ((3, 4), F64, (4,), F32, None),       # a cast too: left to conform()
    ((4,), F64, (4,), F32, None),         # a cast only
    ((5,), F32, (1, 5), F32, None),       # not a broadcast either
]


@pytest.mark.parametrize("seen, seen_dtype, shape, dtype, axes", FOLD_CASES)
def test_fold_equals_conform(seen, seen_dtype, shape, dtype, axes):
    assert _fold_axes(seen, seen_dtype, shape, dtype) == axes
    if axes is None:
        return
    g = np.random.default_rng(0).standard_normal(seen).astype(seen_dtype)
    folded = sum_over(np, g, axes, shape)      # what the program runs at a folded site
    task = engine.GraphTask(False, False, accumulate=True)
    expected = engine.conform(task, None, 0, g, shape, dtype)
    assert folded.shape == expected.shape and folded.dtype == expected.dtype
    np.testing.assert_array_equal(folded, expected)


def _model():
    ag.manual_seed(0)
    block = nn.TransformerBlock(16, 2)
    head = nn.Linear(16, 7)
    x = ag.tensor(np.random.default_rng(2).standard_normal((2, 6, 16)).astype(np.float32))
    params = list(block.parameters()) + list(head.parameters())
    return (lambda: (head(block(x)) ** 2).mean()), params


def test_sites_noted_on_first_replay_folded_after_and_bit_identical():
    build, params = _model()
    eager = []
    for _ in range(4):
        build().backward()
        eager.append([p.grad.numpy().copy() for p in params])
    for p in params:
        p.grad = None
    sources = []
    with ca.enable():
        for step in range(4):
            build().backward()
            prog = ca.last_program()
            # The capture runs the walked program; later runs the recorded one (variant
            # (keep_graph, profiled, order id), the recording's node positions baked in).
            sources.append(prog.source[(False, False) if step == 0 else (False, False, 0)])
            for e, p in zip(eager[step], params):
                np.testing.assert_array_equal(p.grad.numpy(), e)
    # The capture's run notes the sites that needed conform(); from the next backward on,
    # the biases and the LayerNorm weights are summed in the program (the sites whose
    # gradient always fitted still note, should it ever not).
    folded = sources[1].count("_sum_over(")
    assert "_sum_over(" not in sources[0]
    assert folded >= 4 and sources[1].count("_noted(") == sources[0].count("_noted(") - folded
    assert sources[3] is sources[2] is sources[1]     # no new shape: not generated again
    assert ca.stats()["captures"] == 1


def test_an_unexpected_shape_at_a_folded_site_still_reaches_conform():
    """The guard: a site folded for one shape gives any other shape to conform(). Here the
    noted shape of the bias site is made wrong by hand (the key never lets a program see two
    shapes at one site), and the regenerated program still sums the bias gradient right."""
    ag.manual_seed(0)
    lin = nn.Linear(3, 2)
    x = ag.tensor(np.ones((4, 3), dtype=np.float32))
    with ca.enable():
        lin(x).sum().backward()
        prog = ca.last_program()
        (site,) = [k for k, (shape, _) in prog.conform_seen.items() if shape == (4, 2)]
        prog.conform_seen[site] = ((7, 2), np.dtype(np.float32))
        lin.zero_grad()
        lin(x).sum().backward()
    src = prog.source[(False, False, 0)]   # the recorded run's program
    assert src.count("_sum_over(") == 1
    np.testing.assert_array_equal(lin.bias.grad.numpy(), [4.0, 4.0])
    np.testing.assert_array_equal(lin.weight.grad.numpy(), np.full((2, 3), 4.0))


@pytest.mark.parametrize("compiled", [False, True])
def test_a_grad_held_by_the_user_is_kept_or_accumulated_in_place_as_eager(compiled):
    """PyTorch: with ``.grad`` set, the next backward adds into that tensor in place (a held
    reference sees the sum); after ``.grad = None`` it gets a new tensor, and the held one keeps
    its values. Replays (whose bias gradients are summed in the program) do the same."""
    ag.manual_seed(0)
    lin = nn.Linear(3, 2)
    x = ag.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))

    def step():
        if compiled:
            with ca.enable():
                lin(x).sum().backward()
        else:
            lin(x).sum().backward()

    step()
    step()
    held_w, held_b = lin.weight.grad, lin.bias.grad
    first_w, first_b = held_w.numpy().copy(), held_b.numpy().copy()
    step()                                  # accumulates into the held tensors
    assert lin.weight.grad is held_w and lin.bias.grad is held_b
    np.testing.assert_array_equal(held_w.numpy(), first_w * 1.5)
    np.testing.assert_array_equal(held_b.numpy(), first_b * 1.5)
    lin.weight.grad = lin.bias.grad = None
    step()                                  # fresh tensors; the held ones keep their values
    assert lin.weight.grad is not held_w and lin.bias.grad is not held_b
    np.testing.assert_array_equal(held_w.numpy(), first_w * 1.5)
    np.testing.assert_array_equal(lin.bias.grad.numpy(), first_b / 2)
    np.testing.assert_array_equal(lin.weight.grad.numpy(), first_w / 2)


@pytest.mark.parametrize("what", ["hook", "retain_grad", "retain_graph"])
def test_folded_programs_with_hooks_retained_grads_and_retain_graph_equal_eager(what):
    """Four steps eagerly, four compiled (capture, noted replay, folded replays): every .grad,
    retained grad and hook argument equal bit for bit."""
    ag.manual_seed(0)
    lin1, lin2 = nn.Linear(5, 6), nn.Linear(6, 3)
    x = ag.tensor(np.random.default_rng(4).standard_normal((7, 5)).astype(np.float32))
    params = [lin1.weight, lin1.bias, lin2.weight, lin2.bias]

    def run(compiled):
        for p in params:
            p.grad = None
        seen = []
        for _ in range(4):
            h = lin1(x)
            if what == "hook":
                h.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
            elif what == "retain_grad":
                h.retain_grad()
            loss = (lin2(h.relu()) ** 2).sum()
            with (ca.enable() if compiled else ca.disable()):
                loss.backward(retain_graph=what == "retain_graph")
                if what == "retain_graph":
                    loss.backward()
            if what == "retain_grad":
                seen.append(h.grad.numpy().copy())
            seen.extend(p.grad.numpy().copy() for p in params)
        return seen

    eager, compiled = run(False), run(True)
    assert len(eager) == len(compiled)
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)
    assert ca.stats()["hits"] >= 3 and ca.stats()["eager_fallbacks"] == 0
    assert any("_sum_over(" in src for src in ca.last_program().source.values())


def _bias_steps(dtype, upstream, steps=3):
    """Three backwards of a Linear whose output's gradient is ``upstream(y)``'s, eagerly and
    compiled; the bias gradients of each and the last program's source."""
    ag.manual_seed(0)
    lin = nn.Linear(5, 4, dtype=dtype)
    x = ag.tensor(np.random.default_rng(5).standard_normal((64, 5)).astype(dtype))

    def run(compiled):
        got = []
        for _ in range(steps):
            lin.zero_grad()
            with (ca.enable() if compiled else ca.disable()):
                upstream(lin(x)).backward()
            got.append(lin.bias.grad.numpy().copy())
        return got

    return run(False), run(True), ca.last_program().source[(False, False, 0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_bias_sum_is_one_gemv_with_a_ones_vector_the_program_holds(dtype):
    """A folded bias site sums with the program's own ones vector (no lookup per replay):
    the GEMV sum_over runs, so the bits are the eager engine's."""
    w = ag.tensor(np.random.default_rng(6).standard_normal((64, 4)).astype(dtype))
    eager, compiled, src = _bias_steps(dtype, lambda y: (y * w).sum())
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)
    assert "_mm(O" in src and "if v" in src
    prog = ca.last_program()
    (ones,) = [v for v in prog.variants[(False, False, 0)].__globals__.values()
               if isinstance(v, np.ndarray)]
    assert ones.shape == (64,) and ones.dtype == dtype and not ones.flags.writeable
    assert (ones == 1).all()


def test_a_strided_gradient_at_a_folded_bias_site_is_summed_as_the_engine_sums_it():
    """A transposed gradient (here from ``y.T``) is not contiguous: the program hands it to
    sum_over, whose plain sum is what the engine ran (a GEMV over the strided rows could
    round differently)."""
    w = ag.tensor(np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32) * 1e3)
    eager, compiled, src = _bias_steps(np.float32, lambda y: (y.T * w).sum())
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)
    assert "_mm(O" in src and "flags.c_contiguous else _sum_over(" in src


def test_half_precision_bias_sums_stay_with_sum_over():
    """float16 is summed by sum (in float32 inside NumPy), not by a float16 GEMV."""
    eager, compiled, src = _bias_steps(np.float16, lambda y: y.float().sum())
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)
    assert "_mm(" not in src and "_sum_over(" in src
