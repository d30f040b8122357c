"""key_averages().table(): exact text, PyTorch's columns and order, alignment, units, sums."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradtrace.profiler import Scope
from gradtrace.profiler.synthetic import from_events, training_profile
from gradtrace.profiler.format import format_bytes, format_time

U = Scope.USER_SCOPE


def _step_profile(**metadata):
    return from_events([
        {"name": "ProfilerStep#0", "start": 0, "end": 2_000_000, "scope": U},
        {"name": "linear", "start": 100_000, "end": 1_100_000, "shapes": [[8, 16], [4, 16], [4]],
         "stack": ["model.py(12): forward", "train.py(40): step"]},
        {"name": "matmul", "start": 200_000, "end": 900_000, "shapes": [[8, 16], [16, 4]],
         "stack": ["model.py(12): forward", "train.py(40): step"]},
        {"name": "add", "start": 950_000, "end": 1_050_000, "shapes": [[8, 4], [4]],
         "stack": ["model.py(12): forward", "train.py(40): step"]},
        {"name": "a_very_long_operator_name_that_will_not_fit_in_the_column", "start": 1_200_000, "end": 1_201_500},
    ], metadata=metadata)


EXPECTED = """\
-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------
                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls
-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------
                                         ProfilerStep#0        49.92%     998.500us       100.00%       2.000ms       2.000ms             1
                                                 linear        10.00%     200.000us        50.00%       1.000ms       1.000ms             1
                                                 matmul        35.00%     700.000us        35.00%     700.000us     700.000us             1
                                                    add         5.00%     100.000us         5.00%     100.000us     100.000us             1
a_very_long_operator_name_that_will_not_fit_in_the_c...         0.07%       1.500us         0.07%       1.500us       1.500us             1
-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------
Self CPU time total: 2.000ms
"""


def test_table_text_exact():
    assert _step_profile().table() == EXPECTED


def test_sorted_limited_with_header_and_unit():
    text = _step_profile().table(sort_by="self_cpu_time_total", row_limit=2, time_unit="ms",
                                 max_name_column_width=20, header="STEP")
    lines = text.splitlines()
    assert lines[0] == "=" * len(lines[2]) and lines[1] == "STEP"
    assert [line.split()[0] for line in lines[5:7]] == ["ProfilerStep#0", "matmul"]
    assert "0.999ms" in lines[5] and "us" not in text
    assert lines[-1] == "Self CPU time total: 2.000ms"


def _cells(line, widths):
    out, pos = [], 0
    for w in widths:
        out.append(line[pos:pos + w])
        pos += w + 2
    return out


def _layout(text):
    """Column widths from the dashed separator; every header and cell must fit its column."""
    lines = text.splitlines()
    sep_index = next(i for i, line in enumerate(lines) if line.startswith("-"))
    widths = [len(d) for d in lines[sep_index].split("  ")]
    headers = [h.strip() for h in _cells(lines[sep_index + 1], widths)]
    body = []
    for line in lines[sep_index + 3:]:
        if line.startswith("-"):
            break
        body.append(line)
    return widths, headers, body


def _check_alignment(text):
    widths, headers, body = _layout(text)
    for line in body:
        assert len(line) <= sum(widths) + 2 * (len(widths) - 1)
        for w, cell in zip(widths, _cells(line, widths)):
            # right-aligned: a cell never starts in the gap before its column
            assert len(cell) <= w
        gaps = [line[sum(widths[:k]) + 2 * (k - 1): sum(widths[:k]) + 2 * k] for k in range(1, len(widths))]
        assert all(g in ("  ", "") for g in gaps), (line, gaps)
    return widths, headers, body


ALL_COLUMNS = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
               "Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg",
               "CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem",
               "# of Calls", "Input Shapes", "Source Location"]


def _cuda_memory_profile():
    return from_events([
        {"name": "train_step", "start": 0, "end": 10_000, "scope": U, "stack": ["t.py(1): main"]},
        {"name": "matmul", "start": 1_000, "end": 5_000, "device": "cuda:0", "device_start": 100,
         "device_end": 9_100, "shapes": [[64, 64], [64, 64]], "stack": ["t.py(2): main"]},
    ], memory=[{"time": 2_000, "bytes": 16384, "device": "cuda:0"}, {"time": 3_000, "bytes": 512}],
        metadata={"profile_memory": True, "with_flops": True})


def test_all_columns_in_pytorch_order():
    text = _cuda_memory_profile().key_averages(group_by_input_shape=True, group_by_stack_n=1).table()
    _, headers, body = _check_alignment(text)
    assert headers == ALL_COLUMNS + ["Total KFLOPs"]
    assert "16.00 KB" in text and "512 B" in text and "[[64, 64], [64, 64]]" in text
    assert "t.py(2): main" in text
    assert text.splitlines()[-2:] == ["Self CPU time total: 10.000us", "Self CUDA time total: 9.000us"]


@pytest.mark.parametrize("kwargs, present, absent", [
    ({}, [], ["Self CUDA", "CPU Mem", "Input Shapes", "Source Location"]),
    ({"group_by_input_shape": True}, ["Input Shapes"], ["Source Location"]),
    ({"group_by_stack_n": 2}, ["Source Location"], ["Input Shapes"]),
])
def test_optional_columns(kwargs, present, absent):
    text = _step_profile().key_averages(**kwargs).table()
    _, headers, _ = _check_alignment(text)
    for h in present:
        assert h in headers
    for h in absent:
        assert h not in headers


def test_multi_line_stack_cells_stay_aligned():
    text = _step_profile().key_averages(group_by_stack_n=2).table()
    _check_alignment(text)
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if "model.py(12): forward" in line)
    assert lines[i + 1].strip() == "train.py(40): step"
    assert lines[i + 1].index("train.py") > lines[i].index("model.py") - 5


def _percent_column(text, header):
    widths, headers, body = _layout(text)
    k = headers.index(header)
    values = []
    for line in body:
        cell = _cells(line, widths)[k].strip()
        if cell:
            values.append(float(cell.rstrip("%")))
    return values


def test_self_percentages_sum_to_100_on_a_large_profile():
    data = training_profile(20_000, threads=3)
    text = data.table(row_limit=0)
    _check_alignment(text)
    values = _percent_column(text, "Self CPU %")
    assert sum(values) == pytest.approx(100.0, abs=0.01 * len(values))


def test_cuda_percentages_sum_to_100():
    text = _cuda_memory_profile().table()
    assert sum(_percent_column(text, "Self CUDA %")) == pytest.approx(100.0, abs=0.02)


def test_top_level_events_only():
    text = _step_profile().table(top_level_events_only=True)
    names = [line.split()[0] for line in _layout(text)[2]]
    assert names == ["ProfilerStep#0"]


def test_unknown_sort_key():
    with pytest.raises(ValueError, match="sort_by='cpu'"):
        _step_profile().table(sort_by="cpu")


def test_event_list_table_has_one_row_per_event():
    data = training_profile(500)
    text = data.events().table(row_limit=0)
    assert len(_layout(text)[2]) == 500


@pytest.mark.parametrize("us, unit, text", [
    (0.999, None, "0.999us"), (1.5, None, "1.500us"), (1_000, None, "1.000ms"),
    (2_500_000, None, "2.500s"), (1.5, "ms", "0.002ms"), (3_000, "us", "3000.000us"),
    (3_000_000, "s", "3.000s"), (-1_500, None, "-1.500ms"),
])
def test_time_format(us, unit, text):
    assert format_time(us, unit) == text


def test_bad_time_unit():
    with pytest.raises(ValueError, match="time_unit"):
        format_time(1, "min")


@pytest.mark.parametrize("nbytes, text", [(0, "0 B"), (512, "512 B"), (2048, "2.00 KB"),
                                          (-3 * 1024 ** 2, "-3.00 MB"), (5 * 1024 ** 3, "5.00 GB")])
def test_memory_format(nbytes, text):
    assert format_bytes(nbytes) == text


def test_rows_as_dicts():
    rows = _step_profile().rows()
    assert rows[0]["name"] == "ProfilerStep#0"
    assert set(rows[0]) >= {"count", "cpu_time_total", "self_cpu_time_total", "cuda_time_total",
                            "self_cuda_time_total", "cpu_time", "cuda_time", "cpu_memory_usage",
                            "self_cpu_memory_usage", "cuda_memory_usage", "self_cuda_memory_usage",
                            "flops", "input_shapes", "stack"}
    assert rows[1]["cpu_time_total"] == pytest.approx(1000.0)    # microseconds, like PyTorch
    total = _step_profile().total_average()
    assert total.key == "Total" and total.count == 5
    assert total.self_cpu_time_total == pytest.approx(2000.0)
    assert re.fullmatch(r"<FunctionEventAvg key='Total'.*>", repr(total))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 5), st.integers(0, 2**40), st.integers(-1, 1)), max_size=40),
       st.integers(1, 3))
def test_group_rows_are_numpy_unique_of_the_stacked_keys(rows, n_keys):
    """Groups of rows keyed by 1-3 integer columns (small and wide spans): the first row and
    the group of each row that np.unique(..., axis=1) gives."""
    from gradtrace.profiler.aggregate import group_rows

    keys = [np.array([r[k] for r in rows], dtype=np.int64) for k in range(n_keys)]
    first, group = group_rows(keys)
    if not rows:
        assert len(first) == 0 and len(group) == 0
        return
    _, want_first, want_group = np.unique(np.stack(keys), axis=1, return_index=True, return_inverse=True)
    assert first.tolist() == want_first.tolist() and group.tolist() == want_group.reshape(-1).tolist()
