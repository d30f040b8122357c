"""The one definition of a profile's device work (profiler.device), and the three readers that
use it agreeing: the GPU analyses (gpu.device_work), the Chrome trace export (``kernel`` vs
``gpu_user_annotation``) and the per-step samples (stats' "kernel" rows)."""
import numpy as np

from gradtrace import profiler
from gradtrace.profiler import synthetic
from gradtrace.profiler.chrome_layout import chrome_layout
from gradtrace.profiler.device import activity_mask, device_work_rows, has_device_interval
from gradtrace.profiler.gpu import device_work
from tests.profiler.gpu_traces import write_gpu_trace


def _gradtrace_profile():
    """Ops with device intervals (ns): a composite around two primitives on stream 0, an op on
    another stream overlapping them, two ops of one stream overlapping partially (threads
    sharing a stream), and a CPU-only op."""
    dev = dict(device="cuda:0")
    return synthetic.from_events([
        {"name": "composite", "start": 0, "end": 100, "device_start": 10, "device_end": 90, **dev},   # 0
        {"name": "mul", "start": 5, "end": 40, "device_start": 15, "device_end": 40, **dev},          # 1
        {"name": "add", "start": 45, "end": 90, "device_start": 45, "device_end": 80, **dev},         # 2
        {"name": "side", "start": 50, "end": 60, "device_start": 20, "device_end": 85, "stream": 7,
         **dev},                                                                                      # 3
        {"name": "a", "start": 200, "end": 220, "device_start": 200, "device_end": 260, **dev},       # 4
        {"name": "b", "start": 210, "end": 230, "device_start": 240, "device_end": 300, "thread": 2,
         **dev},                                                                                      # 5
        {"name": "cpu_only", "start": 400, "end": 410},                                               # 6
    ])


def test_innermost_device_intervals_of_a_stream_are_the_kernels():
    data = _gradtrace_profile()
    cols = data.event_columns
    assert np.flatnonzero(has_device_interval(cols)).tolist() == [0, 1, 2, 3, 4, 5]
    # composite contains mul and add; side is alone on its stream; a and b overlap without
    # either containing the other, so both are kernels.
    assert device_work_rows(cols, data.gpu_columns).tolist() == [1, 2, 3, 4, 5]
    assert not activity_mask(data.n_events, data.gpu_columns).any()


def test_a_torch_traces_device_work_is_its_gpu_table(tmp_path):
    data = profiler.load(write_gpu_trace(tmp_path / "gpu.json"))
    rows = device_work_rows(data.event_columns, data.gpu_columns)
    assert rows.tolist() == data.gpu_columns["event"].tolist() and len(rows) == 8   # 6 kernels, a memcpy, a memset
    assert activity_mask(data.n_events, data.gpu_columns).sum() == 8


def _agree(data):
    rows = device_work_rows(data.event_columns, data.gpu_columns)
    analysed = np.sort(np.concatenate([w.event for w in device_work(data).values()]))
    assert analysed.tolist() == rows.tolist()
    layout = chrome_layout(data)
    assert np.sort(layout.device.event[layout.device.is_kernel]).tolist() == rows.tolist()
    assert layout.stats["kernels"] == len(rows)


def test_the_gpu_analyses_and_the_chrome_export_name_the_same_kernels(tmp_path):
    _agree(_gradtrace_profile())
    _agree(profiler.load(write_gpu_trace(tmp_path / "gpu.json")))


def test_a_composite_is_an_annotation_in_the_export():
    data = _gradtrace_profile()
    layout = chrome_layout(data)
    annotation = layout.device.event[~layout.device.is_kernel]
    assert [data.name_of(int(i)) for i in annotation] == ["composite"]
