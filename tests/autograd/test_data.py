"""utils.data: datasets, samplers, default_collate and DataLoader, with PyTorch's rules."""
from collections import namedtuple

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                                           IterableDataset, RandomSampler, SequentialSampler,
                                           Subset, TensorDataset, default_collate, random_split)


def _xy(n=10):
    return ag.arange(2 * n, dtype="float32").reshape(n, 2), ag.arange(n)


def test_tensor_dataset_and_sequential_batches():
    x, y = _xy()
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    xi, yi = ds[3]
    np.testing.assert_array_equal(xi.numpy(), [6.0, 7.0])
    assert yi.item() == 3
    dl = ag.utils.data.DataLoader(ds, batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 and len(batches) == 3, "ceil(10 / 4) batches, the last one short"
    assert isinstance(batches[0], list), "a tuple sample collates to a list, as PyTorch"
    assert [b[1].numpy().tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 2) and batches[0][0].dtype == np.float32
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(x, ag.arange(3))


def test_drop_last():
    dl = DataLoader(TensorDataset(*_xy()), batch_size=4, drop_last=True)
    assert len(dl) == 2 and [len(b[1]) for b in dl] == [4, 4]


def test_shuffle_with_a_generator_is_a_seeded_permutation_per_epoch():
    ds = TensorDataset(*_xy())

    def order(dl):
        return [i for b in dl for i in b[1].numpy().tolist()]

    g1, g2 = ag.Generator().manual_seed(7), ag.Generator().manual_seed(7)
    dl1 = DataLoader(ds, batch_size=3, shuffle=True, generator=g1)
    dl2 = DataLoader(ds, batch_size=3, shuffle=True, generator=g2)
    e1, e2 = order(dl1), order(dl2)
    assert sorted(e1) == list(range(10)) and e1 == e2, "same seed, same order"
    assert e1 != list(range(10))
    assert order(dl1) != e1, "each epoch draws a new order"
    # Without a generator, the global seed fixes the order.
    ag.manual_seed(3)
    a = order(DataLoader(ds, batch_size=5, shuffle=True))
    ag.manual_seed(3)
    assert order(DataLoader(ds, batch_size=5, shuffle=True)) == a


def test_default_collate_types():
    # PyTorch: tensors stacked, floats -> float64 tensor, ints -> int64, bools -> bool,
    # strings a list, numpy arrays stacked as tensors, dicts and namedtuples by field.
    Point = namedtuple("Point", "x y")
    batch = [{"t": ag.ones(2), "f": 0.5, "i": 1, "b": True, "s": "a", "a": np.zeros(3, np.int32),
              "p": Point(1, 2.0)},
             {"t": ag.zeros(2), "f": 1.5, "i": 2, "b": False, "s": "b", "a": np.ones(3, np.int32),
              "p": Point(3, 4.0)}]
    out = default_collate(batch)
    assert out["t"].shape == (2, 2)
    assert out["f"].dtype == np.float64 and out["f"].numpy().tolist() == [0.5, 1.5]
    assert out["i"].dtype == np.int64 and out["b"].dtype == np.bool_
    assert out["s"] == ["a", "b"]
    assert out["a"].dtype == np.int32 and out["a"].shape == (2, 3)
    assert isinstance(out["p"], Point) and out["p"].x.numpy().tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
        default_collate([object()])


def test_custom_collate_fn_and_no_batching():
    ds = TensorDataset(*_xy(4))
    dl = DataLoader(ds, batch_size=2, collate_fn=lambda samples: len(samples))
    assert list(dl) == [2, 2]
    single = list(DataLoader(ds, batch_size=None))
    assert len(single) == 4 and single[1][1].item() == 1, "batch_size=None yields samples"


def test_samplers_and_batch_sampler():
    ds = TensorDataset(*_xy())
    bs = BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    assert len(BatchSampler(range(7), 3, drop_last=True)) == 2
    dl = DataLoader(ds, batch_sampler=[[9, 0], [5]])
    assert [b[1].numpy().tolist() for b in dl] == [[9, 0], [5]]
    dl = DataLoader(ds, sampler=[2, 4, 6], batch_size=2)
    assert [b[1].numpy().tolist() for b in dl] == [[2, 4], [6]]
    rs = RandomSampler(ds, replacement=True, num_samples=25, generator=ag.Generator())
    drawn = list(rs)
    assert len(drawn) == 25 and set(drawn) <= set(range(10))
    many = list(RandomSampler(ds, num_samples=23, generator=ag.Generator()))
    assert sorted(many[:10]) == list(range(10)) and sorted(many[10:20]) == list(range(10))
    assert len(many) == 23
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(3), 0, False)


@pytest.mark.parametrize("kw,message", [
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(sampler=[0], shuffle=True), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    (dict(num_workers=-1), "num_workers option should be non-negative"),
])
def test_invalid_arguments_raise_as_pytorch(kw, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(TensorDataset(*_xy()), **kw)


def test_iterable_dataset_is_batched_in_order():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))

        def __len__(self):
            return 7

    dl = DataLoader(Stream(), batch_size=3)
    assert [b.numpy().tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6]] and len(dl) == 3
    assert len(DataLoader(Stream(), batch_size=3, drop_last=True)) == 2
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(), shuffle=True)


def test_subset_concat_and_random_split():
    class Squares(Dataset):
        def __getitem__(self, i):
            return i * i

        def __len__(self):
            return 6

    ds = Squares()
    assert Subset(ds, [5, 1])[0] == 25 and len(Subset(ds, [5, 1])) == 2
    both = ds + Subset(ds, [2])
    assert isinstance(both, ConcatDataset) and len(both) == 7 and both[6] == 4 and both[-1] == 4
    a, b = random_split(ds, [4, 2], generator=ag.Generator().manual_seed(0))
    assert sorted(a.indices + b.indices) == list(range(6)) and len(a) == 4
    # Fractions: floors 3 and 1 of 5, the remainder goes to the first part, as PyTorch.
    parts = random_split(range(5), [0.7, 0.3], generator=ag.Generator())
    assert [len(p) for p in parts] == [4, 1]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [4, 4])


def test_generator_api():
    g = ag.Generator()
    assert g.initial_seed() == 67280421310721, "PyTorch's default seed for a new Generator"
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    a = ag.randn(3, generator=g).numpy()
    state = g.get_state()
    b = ag.randn(3, generator=g).numpy()
    g.set_state(state)
    np.testing.assert_array_equal(ag.randn(3, generator=g).numpy(), b)
    g.manual_seed(5)
    np.testing.assert_array_equal(ag.randn(3, generator=g).numpy(), a)


def test_a_training_loop_through_the_loader():
    ag.manual_seed(0)
    x = ag.randn(64, 3)
    y = x @ ag.tensor([[1.0], [-2.0], [0.5]])
    model = ag.nn.Linear(3, 1)
    opt = ag.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True,
                        generator=ag.Generator().manual_seed(0))
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            loss = ((model(xb) - yb) ** 2).mean()
            loss.backward()
            opt.step()
    np.testing.assert_allclose(model.weight.detach().numpy(), [[1.0, -2.0, 0.5]], atol=1e-3)
