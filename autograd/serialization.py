"""``save`` and ``load`` without pickle: tensors in a safetensors file, structure in its metadata.

The file is a plain safetensors file: 8 bytes (little-endian length of the header), a JSON
header naming each tensor's ``dtype``, ``shape`` and ``data_offsets``, then the raw bytes.
What is not a tensor — the nesting of dicts, lists and tuples, and their ints, floats, strings,
bools and None, as in an optimizer's state dict — is JSON in the header's ``__metadata__``
under ``"gradtrace.structure"``. So a module's ``state_dict()`` saved here is a checkpoint
any safetensors reader opens (its tensors are named by their keys), and a safetensors file
written elsewhere loads here as a dict of tensors.

Nothing is ever unpickled: loading a file runs no code from it.
"""
from __future__ import annotations

import json
import math
import os
from collections import OrderedDict

import numpy

from . import backend
from .nn.parameter import Parameter
from .tensor import Tensor

__all__ = ["save", "load"]

_STRUCTURE_KEY = "gradtrace.structure"
_FORMAT_VERSION = "1"

# safetensors' dtype names; byte order is always little-endian.
_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}
_DTYPE_NAMES = {numpy.dtype(v): k for k, v in _DTYPES.items()}

# The header of a corrupt file can claim any length; refuse absurd ones before reading them.
_MAX_HEADER = 100 * 1024 * 1024


# --------------------------------------------------------------------------- saving


class _Encoder:
    """Turns an object into JSON-able structure, collecting its arrays under unique names."""

    def __init__(self):
        self.arrays: dict[str, numpy.ndarray] = {}
        self._by_id: dict[int, str] = {}    # tensors/arrays seen, so shared ones are saved once

    def _name(self, path: str, obj) -> str:
        known = self._by_id.get(id(obj))
        if known is not None:
            return known
        name = path or "tensor"
        n = 1
        while name in self.arrays:
            n += 1
            name = f"{path or 'tensor'}#{n}"
        self._by_id[id(obj)] = name
        arr = obj._data if isinstance(obj, Tensor) else obj
        host = arr if isinstance(arr, numpy.ndarray) else backend.to_device(arr, backend.CPU)
        if host.dtype.newbyteorder("<") not in _DTYPE_NAMES:
            raise TypeError(f"save: cannot store dtype {host.dtype} (at {path or 'the top'}); "
                            f"supported: {', '.join(sorted(str(numpy.dtype(v)) for v in _DTYPES.values()))}")
        self.arrays[name] = host
        return name

    def encode(self, obj, path: str = ""):
        if isinstance(obj, Tensor):
            tag = {"__tensor__": self._name(path, obj), "device": str(obj.device),
                   "requires_grad": bool(obj.requires_grad)}
            if type(obj).__name__ == "Parameter":
                tag["parameter"] = True
            return tag
        if backend.is_device_array(obj):
            return {"__ndarray__": self._name(path, obj)}
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"__float__": repr(obj)}
        if isinstance(obj, numpy.generic):
            return self.encode(obj.item(), path)
        if isinstance(obj, backend.Device):
            return {"__device__": str(obj)}
        if isinstance(obj, dict):
            kind = "OrderedDict" if isinstance(obj, OrderedDict) else "dict"
            items = [[self.encode(k, f"{path}[key]"), self.encode(v, _join(path, k))]
                     for k, v in obj.items()]
            return {"__" + kind + "__": items}
        if isinstance(obj, (list, tuple)):
            kind = "__tuple__" if isinstance(obj, tuple) else "__list__"
            return {kind: [self.encode(v, _join(path, i)) for i, v in enumerate(obj)]}
        raise TypeError(f"save: cannot store an object of type {type(obj).__name__} (at "
                        f"{path or 'the top'}); gradtrace saves tensors, arrays, dicts, lists, "
                        "tuples, str, int, float, bool and None, never pickles")


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def save(obj, f) -> None:
    """Write ``obj`` (a tensor, a state dict, nested containers of tensors and plain values)
    to ``f`` as a safetensors file, without pickle.

    Args:
        obj: a Tensor or array, or dicts/lists/tuples of them with str, int, float, bool and
            None values, such as ``module.state_dict()`` or ``optimizer.state_dict()``.
        f: a path or a binary file object open for writing.
    """
    enc = _Encoder()
    structure = enc.encode(obj)
    header: dict = {"__metadata__": {"format": "pt", "gradtrace.version": _FORMAT_VERSION,
                                     _STRUCTURE_KEY: json.dumps(structure, allow_nan=False)}}
    # Largest items first keeps every tensor aligned to its item size with no gaps, which
    # safetensors requires (offsets must tile the data buffer).
    order = sorted(enc.arrays, key=lambda k: -enc.arrays[k].dtype.itemsize)
    offset = 0
    blobs = []
    for name in order:
        arr = enc.arrays[name]
        le = arr.dtype.newbyteorder("<")
        data = arr.astype(le, order="C", copy=False)   # (ascontiguousarray makes 0-d 1-d)
        header[name] = {"dtype": _DTYPE_NAMES[le], "shape": list(data.shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)   # pad with spaces so the data starts 8-byte aligned
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            _write(out, text, blobs)
    else:
        _write(f, text, blobs)


def _write(out, text: bytes, blobs) -> None:
    out.write(len(text).to_bytes(8, "little"))
    out.write(text)
    for data in blobs:
        out.write(memoryview(data).cast("B") if data.size else b"")


# --------------------------------------------------------------------------- loading


class _BadFile(ValueError):
    pass


def load(f, map_location=None, weights_only: bool = True):
    """Read what :func:`save` wrote (or any safetensors file, as a dict of tensors).

    Args:
        f: a path or a binary file object open for reading.
        map_location: a device (``"cpu"``, ``"cuda:0"``...) to put every tensor on; by
            default each goes back to the device it was saved from.
        weights_only: accepted for PyTorch compatibility; loading never runs code from the
            file, whatever its value.

    Returns:
        The saved object: tensors come back as Tensors (Parameters where they were), arrays
        as NumPy arrays, containers with their types.

    Raises:
        ValueError: the file is not a valid safetensors file, naming it.
    """
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", repr(f))
    try:
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb") as src:
                header, buffer = _read(src)
        else:
            header, buffer = _read(f)
        arrays = _arrays(header, buffer)
        meta = header.get("__metadata__") or {}
        if not isinstance(meta, dict):
            raise _BadFile("__metadata__ is not a map of strings")
        text = meta.get(_STRUCTURE_KEY)
        if text is None:
            # A safetensors file from elsewhere: its tensors by name.
            return OrderedDict((k, _tensor(a, None, map_location, False, False))
                               for k, a in arrays.items())
        structure = json.loads(text)
        return _decode(structure, arrays, map_location)
    except _BadFile as exc:
        raise ValueError(f"load: {name} is not a valid gradtrace/safetensors file: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"load: {name} is not a valid gradtrace/safetensors file: its header "
                         f"is not JSON ({exc})") from None


def _read(src):
    head = src.read(8)
    if len(head) != 8:
        raise _BadFile("it is shorter than the 8-byte header length")
    n = int.from_bytes(head, "little")
    if n > _MAX_HEADER:
        raise _BadFile(f"its header length {n} is implausible")
    text = src.read(n)
    if len(text) != n:
        raise _BadFile(f"it ends inside its {n}-byte header")
    header = json.loads(text.decode("utf-8"))
    if not isinstance(header, dict):
        raise _BadFile("its header is not a JSON object")
    rest = src.read()
    return header, bytearray(rest)


def _arrays(header: dict, buffer: bytearray) -> dict:
    """Views of the data buffer, one per header entry, after checking the entry fits."""
    out = {}
    end = 0
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise _BadFile(f"entry {key!r} lacks dtype, shape or data_offsets")
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise _BadFile(f"entry {key!r} has unsupported dtype {entry['dtype']!r}")
        shape, offsets = entry["shape"], entry["data_offsets"]
        if (not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) for o in offsets)):
            raise _BadFile(f"entry {key!r} has a malformed shape or data_offsets")
        start, stop = offsets
        dt = numpy.dtype(dtype)
        count = math.prod(shape)
        if not 0 <= start <= stop <= len(buffer) or stop - start != count * dt.itemsize:
            raise _BadFile(f"entry {key!r} does not fit the data ({start}..{stop} for "
                           f"{count} x {dt.itemsize} bytes, buffer of {len(buffer)})")
        out[key] = numpy.frombuffer(buffer, dt, count, start).reshape(shape)
        end = max(end, stop)
    if end != len(buffer):
        raise _BadFile(f"its data buffer has {len(buffer)} bytes, the header accounts for {end}")
    return out


def _tensor(arr, saved_device, map_location, requires_grad, parameter):
    if map_location is not None:
        dev = backend.device(map_location)
    else:
        try:
            dev = backend.device(saved_device)
        except backend.DeviceError as exc:
            raise backend.DeviceError(
                f"load: a tensor was saved on {saved_device}, which cannot be used here ({exc}); "
                "pass map_location='cpu' to load it on the CPU") from None
    if dev.type == "cuda":
        data = backend.to_device(arr, dev)
    else:
        data = arr.astype(arr.dtype.newbyteorder("="), copy=False)
    if parameter:
        return Parameter(Tensor._make(data, False, None, 0, [0], dev), requires_grad)
    t = Tensor._make(data, False, None, 0, [0], dev)
    return t.requires_grad_(True) if requires_grad else t


def _decode(node, arrays: dict, map_location, made=None):
    made = {} if made is None else made     # name -> object, so shared tensors stay shared
    if not isinstance(node, dict):
        if isinstance(node, list):
            raise _BadFile("a bare JSON list in the structure")
        return node
    if len(node) >= 1 and ("__tensor__" in node or "__ndarray__" in node):
        key = node.get("__tensor__", node.get("__ndarray__"))
        if key not in arrays:
            raise _BadFile(f"the structure names a tensor {key!r} the header does not have")
        if key not in made:
            if "__tensor__" in node:
                made[key] = _tensor(arrays[key], node.get("device", "cpu"), map_location,
                                    bool(node.get("requires_grad")), bool(node.get("parameter")))
            else:
                made[key] = arrays[key].astype(arrays[key].dtype.newbyteorder("="), copy=False)
        return made[key]
    if len(node) != 1:
        raise _BadFile(f"an unknown structure node with keys {sorted(node)}")
    (kind, value), = node.items()
    if kind == "__float__":
        return float(value)
    if kind == "__device__":
        return backend.device(value)
    if kind in ("__dict__", "__OrderedDict__"):
        pairs = [(_decode(k, arrays, map_location, made), _decode(v, arrays, map_location, made))
                 for k, v in value]
        return OrderedDict(pairs) if kind == "__OrderedDict__" else dict(pairs)
    if kind == "__list__":
        return [_decode(v, arrays, map_location, made) for v in value]
    if kind == "__tuple__":
        return tuple(_decode(v, arrays, map_location, made) for v in value)
    raise _BadFile(f"an unknown structure node {kind!r}")

