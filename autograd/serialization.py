"""``save`` and ``load``: tensors in a safetensors file, structure in its metadata.

The file is a plain safetensors file: 8 bytes (little-endian length of the header), a JSON
header naming each tensor's ``dtype``, ``shape`` and ``data_offsets``, then the raw bytes.
What is not a tensor — the nesting of dicts, lists and tuples, and their ints, floats, strings,
bools and None, as in an optimizer's state dict — is JSON in the header's ``__metadata__``
under ``"gradtrace.structure"``. So a module's ``state_dict()`` saved here is a checkpoint
any safetensors reader opens (its tensors are named by their keys), and a safetensors file
written elsewhere loads here as a dict of tensors.

Any other object — a whole module (``torch.save(model)``), an optimizer, a config object — is
pickled, as PyTorch pickles it, into one byte entry of the file; its tensors stay safetensors
entries (a module's named by its state-dict keys), referenced from the pickle by number.
Loading such a file runs code from it, so, as in PyTorch, ``load`` refuses it unless
``weights_only=False`` is passed or every class it names was allowed with
``add_safe_globals``; files of tensors and plain values never unpickle anything.
"""
from __future__ import annotations

import io
import json
import math
import os
import pickle
import pickletools
from collections import OrderedDict

import numpy

from . import backend
from .dtypes import BFLOAT16
from .nn.modules.module import Module
from .nn.parameter import Parameter
from ._tensor import Tensor

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals"]

_STRUCTURE_KEY = "gradtrace.structure"
_FORMAT_VERSION = "1"

# safetensors' dtype names; byte order is always little-endian.
_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
    "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}
if BFLOAT16 is not None:   # ml_dtypes' bfloat16: the raw 16 bits, as safetensors' BF16
    _DTYPES["BF16"] = BFLOAT16
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
        return self._pickled(obj, path)

    def _pickled(self, obj, path: str) -> dict:
        """``obj`` pickled (protocol 2, whose classes are plain GLOBAL opcodes a reader can
        list without running anything), each tensor, array and device in it replaced by a
        reference to an entry of this file."""
        if isinstance(obj, Module):     # name the module's tensors by their state-dict keys
            for key, t in obj.state_dict(keep_vars=True).items():
                self._name(_join(path, key), t)
        refs: list = []
        encoder = self

        class _Pickler(pickle.Pickler):
            def persistent_id(self, o):
                if isinstance(o, Tensor) or backend.is_device_array(o):
                    refs.append(encoder.encode(o, _join(path, f"tensor{len(refs)}")))
                    return len(refs) - 1
                if isinstance(o, backend.Device):   # devices are unique objects: by name
                    return f"device:{o}"
                return None

        buf = io.BytesIO()
        try:
            _Pickler(buf, protocol=2).dump(obj)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TypeError(f"save: cannot store an object of type {type(obj).__name__} (at "
                            f"{path or 'the top'}): it is not a tensor or plain value and "
                            f"cannot be pickled ({exc})") from None
        blob = numpy.frombuffer(buf.getvalue(), dtype=numpy.uint8).copy()
        return {"__pickle__": self._name(_join(path, "__pickle__"), blob), "tensors": refs}


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def save(obj, f) -> None:
    """Write ``obj`` to ``f`` as a safetensors file.

    Args:
        obj: a Tensor or array, or dicts/lists/tuples of them with str, int, float, bool and
            None values, such as ``module.state_dict()`` or ``optimizer.state_dict()`` (no
            pickle); any other object in it, such as a whole module, is pickled with its
            tensors kept as entries of the file (loading it needs ``weights_only=False``).
        f: a path or a binary file object open for writing.

    Raises:
        TypeError: an object that cannot be pickled, or a tensor of a dtype safetensors lacks.
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
        # As bytes: a buffer of bfloat16 (ml_dtypes) has no struct format to cast from.
        out.write(data.reshape(-1).view(numpy.uint8).data if data.size else b"")


# --------------------------------------------------------------------------- loading


class _BadFile(ValueError):
    pass


def load(f, map_location=None, weights_only: bool = True):
    """Read what :func:`save` wrote (or any safetensors file, as a dict of tensors).

    Args:
        f: a path or a binary file object open for reading.
        map_location: a device (``"cpu"``, ``"cuda:0"``...) to put every tensor on; by
            default each goes back to the device it was saved from.
        weights_only: True (PyTorch's default): load tensors and plain values, and pickled
            objects (a whole module...) only where every class or function they import was
            allowed with :func:`add_safe_globals`; otherwise refuse the file, naming the
            first one. False: unpickle anything — this runs code from the file, so do it
            only with files from a trusted source.

    Returns:
        The saved object: tensors come back as Tensors (Parameters where they were), arrays
        as NumPy arrays, containers with their types.

    Raises:
        ValueError: the file is not a valid safetensors file, naming it.
        pickle.UnpicklingError: ``weights_only=True`` and the file holds pickled objects.
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
        if weights_only:
            _check_pickles(structure, arrays)
        return _decode(structure, arrays, map_location, restricted=weights_only)
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


def _decode(node, arrays: dict, map_location, made=None, restricted=True):
    """The object a structure node stands for; ``restricted``: pickled objects may import
    only the allowed globals (a weights-only load)."""
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
    if set(node) == {"__pickle__", "tensors"}:
        return _unpickle(node, arrays, map_location, made, restricted)
    if len(node) != 1:
        raise _BadFile(f"an unknown structure node with keys {sorted(node)}")
    (kind, value), = node.items()
    if kind == "__float__":
        return float(value)
    if kind == "__device__":
        return backend.device(value)
    if kind in ("__dict__", "__OrderedDict__"):
        pairs = [(_decode(k, arrays, map_location, made, restricted),
                  _decode(v, arrays, map_location, made, restricted)) for k, v in value]
        return OrderedDict(pairs) if kind == "__OrderedDict__" else dict(pairs)
    if kind == "__list__":
        return [_decode(v, arrays, map_location, made, restricted) for v in value]
    if kind == "__tuple__":
        return tuple(_decode(v, arrays, map_location, made, restricted) for v in value)
    raise _BadFile(f"an unknown structure node {kind!r}")


# --------------------------------------------------------------------------- pickled objects
# A weights-only load unpickles only what imports nothing beyond these containers (the parts
# of a module's pickle that are not its classes) and the globals a program allowed with
# add_safe_globals, as PyTorch's weights-only unpickler.
_PLAIN_GLOBALS = {("collections", "OrderedDict"), ("builtins", "set"), ("__builtin__", "set"),
                  ("builtins", "frozenset"), ("__builtin__", "frozenset")}
_SAFE_GLOBALS: dict = {}      # (module, qualified name) -> the allowed object


def add_safe_globals(safe_globals) -> None:
    """``torch.serialization.add_safe_globals``: allow a weights-only ``load`` to import these
    classes or functions (a program's own module classes, for ``load`` of a whole model).

    Args:
        safe_globals: the classes/functions to allow.
    """
    for obj in safe_globals:
        _SAFE_GLOBALS[(obj.__module__, obj.__qualname__)] = obj


def get_safe_globals() -> list:
    """The globals :func:`add_safe_globals` allowed."""
    return list(_SAFE_GLOBALS.values())


def clear_safe_globals() -> None:
    """Forget every global :func:`add_safe_globals` allowed."""
    _SAFE_GLOBALS.clear()


class safe_globals:
    """``with torch.serialization.safe_globals([Net]):`` allows them inside the block only."""

    def __init__(self, safe_globals):
        self._objs = list(safe_globals)

    def __enter__(self):
        self._saved = dict(_SAFE_GLOBALS)
        add_safe_globals(self._objs)
        return self

    def __exit__(self, *exc):
        _SAFE_GLOBALS.clear()
        _SAFE_GLOBALS.update(self._saved)
        return False


def _allowed(module: str, name: str) -> bool:
    return (module, name) in _PLAIN_GLOBALS or (module, name) in _SAFE_GLOBALS


def _weights_only_error(what: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two "
        "options, do those steps only if you trust the source of the checkpoint.\n\t(1) "
        "Re-running `load` with `weights_only` set to `False` will likely succeed, but it "
        "can result in arbitrary code execution. Do it only if you got the file from a "
        "trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please check "
        "the recommended steps in the following error message.\n\tWeightsUnpickler error: "
        f"Unsupported global: GLOBAL {what} was not an allowed global by default. Please use "
        f"`torch.serialization.add_safe_globals([{what.rsplit('.', 1)[-1]}])` or the "
        f"`torch.serialization.safe_globals([{what.rsplit('.', 1)[-1]}])` context manager to "
        "allowlist this global if you trust this class/function.")


def _pickle_nodes(node):
    """Every pickled-object node of a structure (walked without decoding anything)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if set(n) == {"__pickle__", "tensors"}:
                yield n
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)


def _check_pickles(structure, arrays) -> None:
    """Before a weights-only load runs any pickle: every global each one imports, read from
    its opcodes (nothing run), must be allowed; else PyTorch's error naming the first one.
    save writes protocol 2, whose globals are all plain GLOBAL opcodes; a pickle that names
    them otherwise (STACK_GLOBAL, INST, OBJ) is refused too."""
    for node in _pickle_nodes(structure):
        blob = arrays.get(node["__pickle__"])
        if blob is None:
            continue                 # _decode reports the missing entry
        try:
            ops = [(op.name, arg) for op, arg, _ in pickletools.genops(blob.tobytes())]
        except ValueError as exc:
            raise _BadFile(f"a pickled object is corrupt ({exc})") from None
        for op, arg in ops:
            if op in ("STACK_GLOBAL", "INST", "OBJ"):
                raise _weights_only_error(f"<{op} opcode>")
            if op == "GLOBAL":
                module, name = arg.split(" ", 1)
                if not _allowed(module, name):
                    raise _weights_only_error(f"{module}.{name}")


def _unpickle(node, arrays: dict, map_location, made, restricted: bool):
    key = node["__pickle__"]
    if key not in arrays:
        raise _BadFile(f"the structure names a pickle {key!r} the header does not have")
    refs = node["tensors"]
    if not isinstance(refs, list):
        raise _BadFile("a pickled object's tensors are not a list")

    class _Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if restricted and not _allowed(module, name):    # checked before; kept as a guard
                raise _weights_only_error(f"{module}.{name}")
            return super().find_class(module, name)

        def persistent_load(self, pid):
            if isinstance(pid, str) and pid.startswith("device:"):
                return backend.device(map_location if map_location is not None else pid[7:])
            if not isinstance(pid, int) or not 0 <= pid < len(refs):
                raise _BadFile(f"a pickle refers to tensor {pid!r}, which the file lacks")
            return _decode(refs[pid], arrays, map_location, made, restricted)

    return _Unpickler(io.BytesIO(arrays[key].tobytes())).load()
