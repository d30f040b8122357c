"""Bad input gets a message naming the op, the argument and the shapes, never a bare NumPy
traceback."""
import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import nn
from gradtrace.autograd.nn import functional as F


def test_conv2d_channel_mismatch():
    with pytest.raises(RuntimeError, match=r"conv2d: input has 3 channels, weight expects 4"):
        F.conv2d(ag.randn(1, 3, 5, 5), ag.randn(2, 4, 3, 3))


def test_conv2d_input_too_small_and_wrong_rank():
    with pytest.raises(RuntimeError, match=r"conv2d: input height 2 .* smaller than the dilated kernel 3"):
        F.conv2d(ag.randn(1, 1, 2, 5), ag.randn(1, 1, 3, 3))
    with pytest.raises(RuntimeError, match=r"conv2d: expected a 4-D input .* got shape \[3, 5, 5\]"):
        F.conv2d(ag.randn(3, 5, 5), ag.randn(1, 3, 3, 3))


def test_linear_feature_mismatch():
    with pytest.raises(RuntimeError, match=r"linear: input has 5 features .*weight expects 4"):
        F.linear(ag.randn(2, 5), ag.randn(3, 4))
    with pytest.raises(RuntimeError, match=r"linear: input has 5 features"):
        nn.Linear(4, 3)(ag.randn(2, 5))


def test_cross_entropy_out_of_range_target_names_the_index():
    with pytest.raises(IndexError, match=r"cross_entropy: target 7 at index 2 is out of bounds for 4 classes"):
        F.cross_entropy(ag.randn(3, 4), ag.tensor([0, 1, 7]))
    with pytest.raises(IndexError, match=r"target -3 at index 0"):
        F.cross_entropy(ag.randn(3, 4), ag.tensor([-3, 1, 2]))
    # ignore_index is not out of range
    F.cross_entropy(ag.randn(3, 4), ag.tensor([-100, 1, 2]))


def test_cross_entropy_shape_mismatch():
    with pytest.raises(RuntimeError, match=r"cross_entropy: input of shape \[3, 4\] needs target of shape \[3\], got \[2\]"):
        F.cross_entropy(ag.randn(3, 4), ag.tensor([0, 1]))


def test_load_state_dict_strict_lists_missing_and_unexpected_keys():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    sd = dict(m.state_dict())
    del sd["2.bias"]
    sd["3.weight"] = ag.zeros(1)
    with pytest.raises(RuntimeError) as info:
        m.load_state_dict(sd)
    msg = str(info.value)
    assert 'Missing key(s) in state_dict: "2.bias".' in msg
    assert 'Unexpected key(s) in state_dict: "3.weight".' in msg


def test_load_state_dict_shape_mismatch():
    m = nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape \[3, 3\]"):
        m.load_state_dict({"weight": ag.zeros(3, 3), "bias": ag.zeros(3)})


def test_shape_ops_name_the_shapes():
    with pytest.raises(RuntimeError, match=r"cat: sizes of tensors must match except in dimension 0: "
                                           r"tensor 0 has shape \[2, 3\], tensor 1 has shape \[2, 4\]"):
        ag.cat([ag.randn(2, 3), ag.randn(2, 4)])
    with pytest.raises(RuntimeError, match=r"stack: expects each tensor to be equal size"):
        ag.stack([ag.randn(2), ag.randn(3)])
    with pytest.raises(IndexError, match=r"softmax: dimension 2 is out of range for a tensor of 2 dims"):
        F.softmax(ag.randn(2, 3), 2)
    with pytest.raises(RuntimeError, match=r"bmm: expected 3-D tensors, got shapes \[2, 3\] and \[3, 2\]"):
        ag.bmm(ag.randn(2, 3), ag.randn(3, 2))
    with pytest.raises(RuntimeError, match=r"mse_loss: input has shape \[2, 3\] but target has shape \[3\]"):
        F.mse_loss(ag.randn(2, 3), ag.randn(3))
    with pytest.raises(RuntimeError, match=r"layer_norm: input of shape \[2, 3\] does not end with normalized_shape \[4\]"):
        F.layer_norm(ag.randn(2, 3), 4)


def test_indexing_ops_name_the_bad_index():
    # RuntimeError, as PyTorch 2.13's gather and scatter ("index 5 is out of bounds for
    # dimension 1 with size 3"); its indexing (x[i], index_select) raises IndexError.
    with pytest.raises(RuntimeError, match=r"gather: index 5 is out of bounds for dimension 1 with size 3"):
        ag.randn(2, 3).gather(1, ag.tensor([[0], [5]]))
    with pytest.raises(RuntimeError, match=r"scatter_add: index 5 is out of bounds for dimension 1"):
        ag.zeros(2, 3).scatter_add(1, ag.tensor([[0], [5]]), ag.ones(2, 1))
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for dimension 0 with size 2"):
        ag.randn(2, 3)[ag.tensor([0, 4])]
    with pytest.raises(IndexError, match=r"index_select: index 3 is out of bounds for dimension 0"):
        ag.index_select(ag.randn(2, 3), 0, ag.tensor([3]))
    with pytest.raises(IndexError, match=r"embedding: index 9 is out of range for a weight of 4 rows"):
        F.embedding(ag.tensor([1, 9]), ag.randn(4, 2))
    with pytest.raises(TypeError, match=r"embedding: indices must be an integer tensor"):
        F.embedding(ag.tensor([1.0]), ag.randn(4, 2))


def test_einsum_and_pool_errors():
    with pytest.raises(RuntimeError, match=r"einsum: operand with subscripts 'ij' has shape \[2, 3, 4\]"):
        ag.einsum("ij,jk->ik", ag.randn(2, 3, 4), ag.randn(3, 2))
    # A repeated subscript in an operand is a diagonal (issue 14); in the output it is an
    # error, as in torch.
    with pytest.raises(ValueError, match=r"repeated subscript"):
        ag.einsum("ij->ii", ag.randn(3, 3))
    with pytest.raises(RuntimeError, match=r"max_pool2d: expected a 4-D input"):
        F.max_pool2d(ag.randn(3, 4), 2)
    with pytest.raises(RuntimeError, match=r"batch_norm: weight has shape \[2\], expected \[3\]"):
        F.batch_norm(ag.randn(2, 3, 4), None, None, ag.ones(2), None, training=True)


def test_module_assignment_errors():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign Tensor as parameter 'weight'"):
        m.weight = ag.zeros(2, 2)
    with pytest.raises(ValueError, match=r"Dropout: probability has to be between 0 and 1, got 1.5"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="clamp: at least one of"):
        ag.randn(2).clamp()
    np.testing.assert_array_equal(ag.tensor([1.0, -1.0]).clamp(min=0).numpy(), [1.0, 0.0])
