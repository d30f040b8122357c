"""ag.save / ag.load: safetensors files, round trips of tensors and state dicts (no pickle), and
of whole modules and checkpoints holding them (pickled; weights_only=False to load)."""
import io
import json
import math
from collections import OrderedDict

import numpy as np
import pytest

import gradtrace.autograd as ag
from gradtrace.autograd import optim


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "float16", "int32",
                                   "uint8"])
def test_tensor_round_trip_keeps_dtype_shape_and_values(tmp_path, dtype):
    arr = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    path = tmp_path / "t.safetensors"
    ag.save(ag.tensor(arr), path)
    back = ag.load(path)
    assert isinstance(back, ag.Tensor) and back.dtype == np.dtype(dtype)
    assert back.shape == (2, 3, 4) and back.device == "cpu" and not back.requires_grad
    np.testing.assert_array_equal(back.numpy(), arr)


def test_file_is_plain_safetensors(tmp_path):
    # The layout: u64 little-endian header length, JSON header, then the tensors' bytes.
    sd = OrderedDict(weight=ag.tensor([[1.0, 2.0]], dtype="float32"), step=ag.tensor(7))
    path = tmp_path / "m.safetensors"
    ag.save(sd, str(path))
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert (8 + n) % 8 == 0, "data starts 8-byte aligned"
    header = json.loads(raw[8:8 + n])
    assert header["weight"] == {"dtype": "F32", "shape": [1, 2], "data_offsets": [8, 16]}
    assert header["step"] == {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}
    assert all(isinstance(v, str) for v in header["__metadata__"].values())
    data = raw[8 + n:]
    np.testing.assert_array_equal(np.frombuffer(data[8:16], "<f4"), [1.0, 2.0])


def test_module_state_dict_round_trip_and_load_state_dict(tmp_path):
    ag.manual_seed(0)
    model = ag.nn.Sequential(ag.nn.Linear(4, 3), ag.nn.ReLU(), ag.nn.Linear(3, 2))
    ag.save(model.state_dict(), tmp_path / "model.safetensors")
    loaded = ag.load(tmp_path / "model.safetensors")
    assert isinstance(loaded, OrderedDict) and list(loaded) == list(model.state_dict())
    other = ag.nn.Sequential(ag.nn.Linear(4, 3), ag.nn.ReLU(), ag.nn.Linear(3, 2))
    result = other.load_state_dict(loaded)
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = ag.randn(5, 4)
    np.testing.assert_array_equal(other(x).detach().numpy(), model(x).detach().numpy())
    # strict=True names the missing key; strict=False reports it.
    del loaded["2.bias"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "2.bias"'):
        other.load_state_dict(loaded)
    assert other.load_state_dict(loaded, strict=False).missing_keys == ["2.bias"]


def test_nested_structure_round_trip(tmp_path):
    shared = ag.tensor([1.0, 2.0])
    obj = {"a": [1, 2.5, "x", None, True, (3, 4)], 0: {"t": shared, "again": shared},
           "inf": math.inf, "nan": math.nan, "arr": np.array([1, 2], dtype=np.int64),
           "param": ag.nn.Parameter(ag.ones(2)), "grad": ag.ones(1, requires_grad=True)}
    buf = io.BytesIO()
    ag.save(obj, buf)
    buf.seek(0)
    back = ag.load(buf)
    assert back["a"] == [1, 2.5, "x", None, True, (3, 4)] and isinstance(back["a"][5], tuple)
    assert list(back) == ["a", 0, "inf", "nan", "arr", "param", "grad"]
    assert back["inf"] == math.inf and math.isnan(back["nan"])
    assert back[0]["t"] is back[0]["again"], "a tensor saved twice is loaded once, shared"
    assert isinstance(back["arr"], np.ndarray) and back["arr"].dtype == np.int64
    assert isinstance(back["param"], ag.nn.Parameter) and back["param"].requires_grad
    assert back["grad"].requires_grad and back["grad"].is_leaf


@pytest.mark.parametrize("make", [
    lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
], ids=["adam", "sgd", "rmsprop", "adagrad"])
def test_optimizer_resumed_from_a_file_continues_identically(tmp_path, make):
    ag.manual_seed(1)
    model = ag.nn.Linear(3, 2).double()
    opt = make(model.parameters())
    data = [ag.randn(4, 3, dtype="float64") for _ in range(6)]

    def step(m, o, x):
        o.zero_grad()
        (m(x) ** 2).sum().backward()
        o.step()

    for x in data[:3]:
        step(model, opt, x)
    ag.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3},
            tmp_path / "ckpt.safetensors")
    ckpt = ag.load(tmp_path / "ckpt.safetensors")
    assert ckpt["epoch"] == 3
    model2 = ag.nn.Linear(3, 2).double()
    opt2 = make(model2.parameters())
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    for x in data[3:]:
        step(model, opt, x)
        step(model2, opt2, x)
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_unpicklable_objects_and_unsupported_dtypes_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot store an object of type function \\(at x.0\\)"):
        ag.save({"x": [lambda: 0]}, tmp_path / "bad")
    with pytest.raises(TypeError, match="cannot store dtype complex128"):
        ag.save(ag.tensor(np.ones(2, dtype=np.complex128)), tmp_path / "bad")


def _file(header: bytes, data: bytes = b"") -> bytes:
    return len(header).to_bytes(8, "little") + header + data


@pytest.mark.parametrize("content,message", [
    (b"\x01\x02", "shorter than the 8-byte header length"),
    ((10 ** 12).to_bytes(8, "little") + b"{}", "header length 1000000000000 is implausible"),
    ((20).to_bytes(8, "little") + b"{}", "ends inside its 20-byte header"),
    (_file(b"nope"), "header is not JSON"),
    (_file(b"[]"), "header is not a JSON object"),
    (_file(b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', bytes(4)),
     "entry 'w' does not fit the data"),
    (_file(b'{"w":{"dtype":"Q32","shape":[1],"data_offsets":[0,4]}}', bytes(4)),
     "unsupported dtype 'Q32'"),
    (_file(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(8)),
     "data buffer has 8 bytes, the header accounts for 4"),
    (_file(b'{"w":{"dtype":"F32","shape":[1]}}', bytes(4)), "lacks dtype, shape or data_offsets"),
], ids=["short", "huge_header", "truncated_header", "not_json", "not_object", "overrun",
        "bad_dtype", "trailing_bytes", "missing_offsets"])
def test_bad_files_give_an_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "broken.safetensors"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as info:
        ag.load(path)
    assert str(path) in str(info.value)


def test_a_safetensors_file_from_elsewhere_loads_as_a_dict(tmp_path):
    # As written by the safetensors library: no gradtrace structure in the metadata.
    header = json.dumps({"b": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
                         "__metadata__": {"format": "pt"}}).encode()
    path = tmp_path / "foreign.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header
                     + np.array([5, 6], "<i8").tobytes())
    back = ag.load(path)
    assert list(back) == ["b"] and back["b"].dtype == np.int64
    np.testing.assert_array_equal(back["b"].numpy(), [5, 6])


def test_map_location_and_unusable_saved_device(tmp_path):
    path = tmp_path / "t.safetensors"
    ag.save(ag.ones(2), path)
    assert ag.load(path, map_location="cpu").device == "cpu"
    if not ag.cuda_is_available():
        # A file saved from a GPU names its device; without one, the error says what to do.
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        meta = header["__metadata__"]
        meta["gradtrace.structure"] = meta["gradtrace.structure"].replace('"cpu"', '"cuda:0"')
        path.write_bytes(_file(json.dumps(header).encode(), raw[8 + n:]))
        with pytest.raises(ag.DeviceError, match="map_location='cpu'"):
            ag.load(path)
        assert ag.load(path, map_location="cpu").device == "cpu"


def test_weights_only_loads_never_unpickle(tmp_path, monkeypatch):
    # Tensors and plain values are JSON and safetensors entries: no pickle is involved,
    # whatever weights_only says; a file holding pickled objects is refused by default.
    import pickle
    import types

    import gradtrace.autograd.serialization as ser

    class Forbidden:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a load unpickled something")

    monkeypatch.setattr(ser, "pickle", types.SimpleNamespace(
        Unpickler=Forbidden, Pickler=pickle.Pickler, PicklingError=pickle.PicklingError,
        UnpicklingError=pickle.UnpicklingError))
    ag.save({"w": ag.ones(2), "step": 3, "cfg": {"lr": 0.1}}, tmp_path / "plain")
    assert ag.load(tmp_path / "plain")["step"] == 3
    assert ag.load(tmp_path / "plain", weights_only=False)["cfg"] == {"lr": 0.1}
    ag.save({"model": ag.nn.Linear(2, 2)}, tmp_path / "module")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        ag.load(tmp_path / "module")


class Net(ag.nn.Module):
    """A program's own module class (pickled by reference, as PyTorch's)."""

    def __init__(self):
        super().__init__()
        self.conv = ag.nn.Conv2d(1, 2, 3)
        self.bn = ag.nn.BatchNorm2d(2)
        self.fc = ag.nn.Linear(2, 3)
        self.act = ag.nn.functional.relu     # a function attribute pickles by name too

    def forward(self, x):
        return self.fc(self.act(self.bn(self.conv(x))).mean((2, 3)))


def test_whole_module_round_trip_needs_weights_only_false(tmp_path):
    import pickle

    ag.manual_seed(0)
    net = Net()
    net.train()
    x = ag.randn(2, 1, 5, 5)
    net(x)                                   # running stats and num_batches_tracked move
    net.eval()
    path = tmp_path / "model.pt"
    ag.save(net, path)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL "
                                                     "tests.autograd.test_serialization.Net"):
        ag.load(path)
    back = ag.load(path, weights_only=False)
    assert type(back) is Net and back.training is False
    assert list(back.state_dict()) == list(net.state_dict())
    for (k, a), b in zip(net.state_dict().items(), back.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    assert all(isinstance(p, ag.nn.Parameter) and p.requires_grad for p in back.parameters())
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())
    # The tensors are safetensors entries named by their state-dict keys.
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    assert set(net.state_dict()) <= set(header)


def test_checkpoint_of_model_optimizer_and_values_resumes(tmp_path):
    ag.manual_seed(1)
    net = Net()
    opt = ag.optim.AdamW(net.parameters(), lr=0.01)
    x = ag.randn(2, 1, 5, 5)

    def step(model, optimizer):
        optimizer.zero_grad()
        model(x).pow(2).sum().backward()
        optimizer.step()

    step(net, opt)
    ag.save({"model": net, "optimizer": opt.state_dict(), "epoch": 1, "best": 0.5,
             "config": {"lr": 0.01, "layers": [1, 2]}}, tmp_path / "ckpt.pt")
    ck = ag.load(tmp_path / "ckpt.pt", weights_only=False)
    assert ck["epoch"] == 1 and ck["config"] == {"lr": 0.01, "layers": [1, 2]}
    net2 = ck["model"]
    opt2 = ag.optim.AdamW(net2.parameters(), lr=0.01)
    opt2.load_state_dict(ck["optimizer"])
    step(net, opt)
    step(net2, opt2)
    for a, b in zip(net.parameters(), net2.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_weights_only_load_of_a_module_whose_globals_are_allowed(tmp_path):
    import pickle

    from gradtrace.autograd import serialization

    ag.manual_seed(2)
    net = Net().eval()
    path = tmp_path / "model.pt"
    ag.save(net, path)
    allowed = [Net, ag.nn.Conv2d, ag.nn.BatchNorm2d, ag.nn.Linear, ag.nn.functional.relu]
    # Each global must be allowed: the error names the first one that is not.
    with serialization.safe_globals([g for g in allowed if g is not ag.nn.BatchNorm2d]):
        with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL \S*\.BatchNorm2d was not an "
                                                         r"allowed global by default. Please "
                                                         r"use `torch.serialization.add_safe_"
                                                         r"globals\(\[BatchNorm2d\]\)`"):
            ag.load(path)
    with serialization.safe_globals(allowed):
        back = ag.load(path)
    assert serialization.get_safe_globals() == []       # the context restored the list
    x = ag.randn(1, 1, 5, 5)
    assert type(back) is Net
    np.testing.assert_array_equal(back(x).detach().numpy(), net(x).detach().numpy())
    serialization.add_safe_globals(allowed)
    try:
        assert type(ag.load(path)) is Net
    finally:
        serialization.clear_safe_globals()
