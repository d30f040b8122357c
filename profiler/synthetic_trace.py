"""Large torch.profiler (Kineto) traces written to a file, for the import benchmark and tests.

:func:`write_torch_trace` writes a trace of any size in the layout PyTorch 2.x writes
(``prof.export_chrome_trace``): Kineto's indented layout, one field group per line and ``},``
plus a newline between events; a header with ``schemaVersion``, ``deviceProperties``,
``distributedInfo``, ``baseTimeNanoseconds``; ``ts``/``dur`` in microseconds with nanosecond
fractions. Its steps repeat the shape of a real training trace (the mix of the
``gpu_5steps_rank0`` sample: about a third runtime calls, a quarter ops, a third flows, one
event in fifteen a kernel or copy), plus what that sample lacks:

* ``ProfilerStep#N``, ``forward``/``backward``/``Optimizer.step`` ``user_annotation`` ranges;
* ``python_function`` frames with ``Python id``/``Python parent id``, ``nn.Module: Linear_k``
  module ranges around each layer;
* ``cpu_op`` forward ops with ``Input Dims``, ``Input type``, ``Input Strides``, sequence
  numbers; backward nodes on the autograd thread inside ``autograd::engine::evaluate_function``
  ranges, with ``Fwd thread id``;
* ``cudaLaunchKernel``/``cudaMemcpyAsync`` runtime calls with ``correlation``, their kernels
  (grid, block, registers, shared memory, blocks and warps per SM, occupancy), memcpys and
  memsets (bytes, bandwidth), ``ac2g`` flows from launch to kernel, ``fwdbwd`` flows;
* ``[memory]`` instants, ``thread_name`` metadata.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

__all__ = ["write_torch_trace"]

_PID, _MAIN, _BWD, _STREAM = 4242, 4242, 4300, 7
_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
         "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
_GEMM = "ampere_sgemm_128x64_tn"
_RELU = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
         "(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
         "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda(float)#1}> >(int, T3)")


class _Writer:
    """Writes events in Kineto's layout; ``t`` is the running clock in ns."""

    def __init__(self, out, layers: int):
        self.out = out
        self.layers = layers
        self.t = 5_000_000
        self.ext = self.corr = self.seq = self.py = 0
        self.n = 0

    @staticmethod
    def us(ns: int) -> str:
        return f"{ns // 1000}.{ns % 1000:03d}"

    def write(self, text: str) -> None:
        self.out.write(text)
        self.n += 1

    def x(self, cat, name, start, end, tid=_MAIN, args=""):
        self.ext += 1
        self.write(f',\n  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {_PID}, "tid": {tid},\n'
                   f'    "ts": {self.us(start)}, "dur": {self.us(end - start)},\n'
                   f'    "args": {{\n      "External id": {self.ext},{args}"Ev Idx": {self.n}\n    }}\n  }}')
        return self.ext

    def frame(self, name, start, end, parent):
        self.py += 1
        self.write(f',\n  {{\n    "ph": "X", "cat": "python_function", "name": "{name}", "pid": {_PID}, '
                   f'"tid": {_MAIN},\n    "ts": {self.us(start)}, "dur": {self.us(end - start)},\n'
                   f'    "args": {{\n      "Python parent id": {parent}, "Python id": {self.py}, '
                   f'"Python thread": 0\n    }}\n  }}')
        return self.py

    def op(self, name, start, end, dims, seq=None, fwd_tid=None, tid=_MAIN):
        extra = ""
        if seq is not None:
            extra += f' "Sequence number": {seq}, "Fwd thread id": {fwd_tid},'
        types = ", ".join('"float"' for _ in dims)
        strides = ", ".join(str([d[-1], 1] if len(d) == 2 else [1]) for d in dims)
        concrete = ", ".join('""' for _ in dims)
        extra += (f' "Record function id": 0, "Concrete Inputs": [{concrete}], "Input type": [{types}], '
                  f'"Input Strides": [{strides}], "Input Dims": {json.dumps(dims)},')
        return self.x("cpu_op", name, start, end, tid, extra)

    def flow(self, ph, cat, fid, ts, pid, tid):
        bp = ', "bp": "e"' if ph == "f" else ""
        self.write(f',\n  {{\n    "ph": "{ph}", "id": {fid}, "pid": {pid}, "tid": {tid}, "ts": {self.us(ts)},\n'
                   f'    "cat": "{cat}", "name": "{cat}"{bp}\n  }}')

    def gpu(self, cat, name, k0, k1, ext, args, launch_start, launch_tid):
        """A kernel, memcpy or memset on the stream from ``k0`` to ``k1``, ``args`` after its
        External id, then its ac2g flow from the runtime call at ``launch_start`` on
        ``launch_tid``."""
        self.write(f',\n  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": {_STREAM},\n'
                   f'    "ts": {self.us(k0)}, "dur": {self.us(k1 - k0)},\n'
                   f'    "args": {{\n      "External id": {ext}, {args}\n    }}\n  }}')
        self.flow("s", "ac2g", self.corr, launch_start, _PID, launch_tid)
        self.flow("f", "ac2g", self.corr, k0, 0, _STREAM)

    def launch(self, kernel, start, tid=_MAIN, gemm=False, runtime_calls=2):
        """cudaLaunchKernel at ``start`` and its kernel 10 us later, with its ac2g flow; a few
        runtime calls without a kernel before it (cudaGetDevice..., as real traces have). The
        kernel's External id is the op written next (the op around the launch)."""
        ext = self.ext + runtime_calls + 2
        for k in range(runtime_calls):
            self.corr += 1
            self.x("cuda_runtime", "cudaGetDevice" if k % 2 else "cudaStreamIsCapturing", start - 900 + 400 * k,
                   start - 700 + 400 * k, tid, f' "cbid": 17, "correlation": {self.corr},')
        self.corr += 1
        self.x("cuda_runtime", "cudaLaunchKernel", start, start + 3000, tid,
               f' "cbid": 211, "correlation": {self.corr},')
        k0 = start + 10_000
        k1 = k0 + (20_000 if gemm else 5_000)
        grid, block, regs = ((160, 1, 1), (128, 1, 1), 32) if gemm else ((1024, 1, 1), (256, 1, 1), 18)
        self.gpu("kernel", kernel, k0, k1, ext,
                 f'"queued": 0, "device": 0, "context": 1, '
                 f'"stream": {_STREAM}, "correlation": {self.corr}, "registers per thread": {regs}, '
                 f'"shared memory": {16384 if gemm else 0}, "blocks per SM": 1.4814814814814814, '
                 f'"warps per SM": 5.925925925925926, "grid": [{grid[0]}, {grid[1]}, {grid[2]}], '
                 f'"block": [{block[0]}, {block[1]}, {block[2]}], "est. achieved occupancy %": 9',
                 start, tid)

    def copy(self, start, ext, nbytes, memset=False):
        self.corr += 1
        self.x("cuda_runtime", "cudaMemsetAsync" if memset else "cudaMemcpyAsync", start, start + 4000, _MAIN,
               f' "cbid": {51 if memset else 41}, "correlation": {self.corr},')
        k0 = start + 6_000
        cat, name = ("gpu_memset", "Memset (Device)") if memset else ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)")
        self.gpu(cat, name, k0, k0 + 3_000, ext,
                 f'"device": 0, "context": 1, "stream": {_STREAM}, '
                 f'"correlation": {self.corr}, "bytes": {nbytes}, "memory bandwidth (GB/s)": '
                 f'{nbytes / 3000:.15g}',
                 start, _MAIN)

    def memory(self, at, nbytes, total, tid=_MAIN):
        self.write(f',\n  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
                   f'    "pid": {_PID}, "tid": {tid},\n    "ts": {self.us(at)},\n'
                   f'    "args": {{\n      "Total Reserved": 41943040, "Total Allocated": {total}, '
                   f'"Bytes": {nbytes}, "Addr": {139872000 + 512 * (self.n % 64)}, "Device Id": 0, '
                   f'"Device Type": 1, "Ev Idx": {self.n}\n    }}\n  }}')

    def step(self, k: int, batch: int = 64, width: int = 512) -> None:
        """One training step: forward under module ranges and Python frames, backward on the
        autograd thread, optimizer."""
        t0 = self.t
        t = t0 + 2_000
        self.copy(t, self.ext + 1, batch * width * 4)
        t += 12_000
        fwd_seq = []
        act = [batch, width]
        forward_start = t
        t += 1_000
        top = self.frame("train.py(42): train_step", forward_start, forward_start + self.layers * 60_000 + 1_500, 0)
        for layer in range(self.layers):
            m0 = t
            t += 500
            module = self.frame(f"nn.Module: Linear_{layer}", m0, m0 + 59_000, top)
            fwd = self.frame("torch/nn/modules/linear.py(114): forward", t, t + 45_000, module)
            lin0 = t
            seq = self.seq
            t += 2_000
            self.op("aten::t", t, t + 4_000, [[width, width]], seq, 0)
            t += 6_000
            self.seq += 1
            a0 = t
            self.launch(_GEMM, t + 5_000, gemm=True)
            self.memory(t + 4_000, batch * width * 4, 1 << 24)
            self.op("aten::addmm", a0, a0 + 20_000, [[width], act, [width, width], [], []], seq + 1, 0)
            t = a0 + 22_000
            self.op("aten::linear", lin0, t, [act, [width, width], [width]], seq, 0)
            self.flow("s", "fwdbwd", seq, lin0, _PID, _MAIN)
            self.seq += 1
            t = lin0 + 46_000
            self.frame("torch/nn/modules/activation.py(103): forward", t, t + 11_000, module)
            self.launch(_RELU, t + 3_000)
            self.op("aten::relu", t, t + 9_000, [act], self.seq, 0)
            fwd_seq.append((seq, self.seq))
            self.seq += 1
            t = m0 + 60_000
        self.x("user_annotation", "forward", forward_start, t)
        # Backward: the autograd thread runs the nodes, innermost layer first.
        b = t + 5_000
        for seq_t, seq_relu in reversed(fwd_seq):
            for node, seq, ops in (("ReluBackward0", seq_relu, ["aten::threshold_backward"]),
                                   ("AddmmBackward0", seq_t + 1, ["aten::mm", "aten::mm", "aten::sum"]),
                                   ("TBackward0", seq_t, ["aten::t"])):
                w0 = b
                b += 1_000
                n0 = b
                b += 1_000
                for name in ops:
                    self.launch(_GEMM if name == "aten::mm" else _FILL, b + 1_500, tid=_BWD,
                                gemm=name == "aten::mm")
                    self.op(name, b, b + 8_000, [act, [width, width]], tid=_BWD)
                    b += 9_000
                self.op(node, n0, b, [act], seq, 1, tid=_BWD)
                if node == "AddmmBackward0":
                    self.flow("f", "fwdbwd", seq_t, n0, _PID, _BWD)
                b += 1_000
                self.memory(b, -batch * width * 4, 1 << 24, tid=_BWD)
                self.op(f"autograd::engine::evaluate_function: {node}", w0, b + 500, [], seq, 1, tid=_BWD)
                b += 2_000
        self.x("user_annotation", "backward", t + 4_000, b + 1_000)
        o = b + 3_000
        self.launch(_FILL, o + 2_000)
        self.op("aten::_foreach_add_", o + 1_000, o + 12_000, [[width, width], [width, width], []])
        self.copy(o + 13_000, self.ext + 1, 4096, memset=True)
        self.x("user_annotation", "Optimizer.step#SGD.step", o, o + 24_000)
        end = o + 26_000
        self.x("user_annotation", f"ProfilerStep#{k}", t0, end)
        self.t = end + 5_000


_HEADER = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA H100 80GB HBM3", '
           '"totalGlobalMem": 85029158912,\n      "computeMajor": 9, "computeMinor": 0,\n      '
           '"maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, '
           '"warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132\n    }\n  ],\n'
           '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},\n'
           '  "record_shapes": 1,\n  "profile_memory": 1,\n  "with_stack": 1,\n'
           '  "baseTimeNanoseconds": 1700000000000000000,\n  "traceEvents": [\n'
           '  {\n    "name": "process_name", "ph": "M", "ts": 0.000, "pid": 4242, "tid": 0,\n'
           '    "args": {\n      "name": "python3"\n    }\n  }')


def write_torch_trace(path, n_events: int, *, gz: bool = False, layers: int = 8) -> int:
    """Write a trace of at least ``n_events`` events (whole steps) to ``path``.

    Args:
        path: the file to write (gzip when ``gz``).
        n_events: how many events at least (a step of 8 layers is about 520).
        layers: Linear+ReLU layers per step.
    Returns:
        The number of events written.
    """
    # Level 6, as zlib's default (9 writes the file three times slower for 2% less).
    opener = (lambda p, *a, **k: gzip.open(p, *a, compresslevel=6, **k)) if gz else open
    with opener(Path(path), "wt", encoding="utf-8", newline="\n") as out:
        out.write(_HEADER)
        w = _Writer(out, layers)
        for tid, name in ((_MAIN, "python3"), (_BWD, "pt_autograd_0")):
            w.write(f',\n  {{\n    "name": "thread_name", "ph": "M", "ts": 0.000, "pid": {_PID}, "tid": {tid},\n'
                    f'    "args": {{\n      "name": "thread {tid} ({name})"\n    }}\n  }}')
        k = 0
        while w.n + 1 < n_events:
            w.step(k)
            k += 1
        out.write('\n  ],\n  "traceName": "synthetic.pt.trace.json",\n  "displayTimeUnit": "ms"\n}\n')
    return w.n + 1
