"""Reentrant backward, multithreading switch, anomaly mode."""
import threading

import numpy as np
import pytest

import gradtrace.autograd as ag


def test_backward_inside_custom_function_backward():
    class Inner(ag.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with ag.enable_grad():
                xx = x.detach().requires_grad_()
                inner = (xx ** 3).sum()
                (d,) = ag.grad(inner, xx)     # a backward inside a backward
            return g * d

    x = ag.tensor([1.0, 2.0], requires_grad=True)
    Inner.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])


def test_endless_reentrant_backward_stops_with_clear_error():
    class Forever(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            # A custom backward runs with grad off unless create_graph (as in PyTorch):
            # a backward inside it records its graph under enable_grad.
            with ag.enable_grad():
                y = ag.tensor([1.0], requires_grad=True)
                Forever.apply(y).sum().backward()
            return g

    x = ag.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="maximum reentrant backward depth"):
        Forever.apply(x).sum().backward()
    (x * 2).sum().backward()          # the engine still works
    assert x.grad.item() == 2.0


def test_multithreading_switch_serializes_and_stays_correct():
    w = ag.tensor(np.zeros(3), requires_grad=True)
    ag.set_multithreading_enabled(False)
    try:
        assert not ag.is_multithreading_enabled()
        threads = [threading.Thread(target=lambda: [(w * 2).sum().backward() for _ in range(50)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        ag.set_multithreading_enabled(True)
    np.testing.assert_array_equal(w.grad.numpy(), np.full(3, 400.0))


def test_nan_in_backward_names_node_and_forward_call_site():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with ag.detect_anomaly():
        y = x * float("nan")     # this line must appear in the report
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    assert "Function 'MulBackward0' returned nan values in its 0th output." in str(info.value)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Traceback of forward call" in notes and "y = x * float(\"nan\")" in notes


def test_error_in_backward_is_reraised_with_forward_traceback():
    class Broken(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("backward exploded")

    x = ag.tensor([1.0], requires_grad=True)
    with ag.detect_anomaly():
        out = Broken.apply(x)    # forward call site
        with pytest.raises(ValueError, match="backward exploded") as info:
            out.sum().backward()
    notes = "\n".join(info.value.__notes__)
    assert "Error detected in BrokenBackward" in notes and "out = Broken.apply(x)" in notes


def test_nested_backward_records_parent_node():
    x = ag.tensor([0.5], requires_grad=True)
    with ag.detect_anomaly(check_nan=False):
        y = (x ** 3).sum()
        (g,) = ag.grad(y, x, create_graph=True)
    parent = g.grad_fn._extra.anomaly_parent
    assert parent is not None and parent.name() in {"PowBackward0", "SumBackward0"}


def test_no_anomaly_means_no_trace_kept():
    x = ag.tensor([1.0], requires_grad=True)
    assert not ag.is_anomaly_enabled()
    assert (x * 2).grad_fn._extra is None
    with ag.set_detect_anomaly(True):
        assert ag.is_anomaly_enabled()
    assert not ag.is_anomaly_enabled()
