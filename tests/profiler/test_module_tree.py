"""Per-module forward + backward cost as the module tree (profiler.module_tree)."""
from pathlib import Path

import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import nn
from gradtrace.profiler import Scope
from gradtrace.profiler.module_tree import flatten, module_tree
from gradtrace.profiler.synthetic import from_events

F, B, U = Scope.FUNCTION, Scope.BACKWARD_FUNCTION, Scope.USER_SCOPE
FIXTURE = Path(__file__).parent / "data" / "torch_mlp_cpu.json.gz"


def _step(t, with_loss=True):
    """One training step at time t (ns): Net > (Linear, ReLU, Linear), a loss op outside every
    module, and the backward of each forward op (sequence numbers 10*t-relative)."""
    s = t // 1000
    return [
        {"name": "nn.Module: Net", "start": t, "end": t + 1_000, "scope": U},
        {"name": "nn.Module: Linear", "start": t + 100, "end": t + 300, "scope": U},
        {"name": "addmm", "start": t + 150, "end": t + 250, "sequence_nr": s + 0},
        {"name": "nn.Module: ReLU", "start": t + 300, "end": t + 400, "scope": U},
        {"name": "relu", "start": t + 310, "end": t + 390, "sequence_nr": s + 1},
        {"name": "nn.Module: Linear", "start": t + 500, "end": t + 900, "scope": U},
        {"name": "addmm", "start": t + 550, "end": t + 850, "sequence_nr": s + 2},
        {"name": "mse_loss", "start": t + 1_000, "end": t + 1_100, "sequence_nr": s + 3},
        # backward, in reverse order; the second Linear's node runs an op inside it
        {"name": "MseLossBackward0", "start": t + 1_200, "end": t + 1_250, "scope": B, "sequence_nr": s + 3,
         "fwd_thread_id": 1},
        {"name": "AddmmBackward0", "start": t + 1_300, "end": t + 1_700, "scope": B, "sequence_nr": s + 2,
         "fwd_thread_id": 1},
        {"name": "mm", "start": t + 1_400, "end": t + 1_600},
        {"name": "ReluBackward0", "start": t + 1_700, "end": t + 1_750, "scope": B, "sequence_nr": s + 1,
         "fwd_thread_id": 1},
        {"name": "AddmmBackward0", "start": t + 1_750, "end": t + 1_950, "scope": B, "sequence_nr": s + 0,
         "fwd_thread_id": 1},
        {"name": "optimizer", "start": t + 1_950, "end": t + 2_000},
    ]


def _two_steps():
    return from_events(_step(0) + _step(10_000), metadata={"with_modules": True})


def _rows(roots):
    return {n.key: n for n in flatten(roots)}


# name: (count, fwd self, fwd total, bwd self, bwd total) in us, per two steps
EXPECTED = {
    "Net": (2, 0.6, 2.0, 0.0, 1.3),
    "Net > Linear #1": (2, 0.4, 0.4, 0.4, 0.4),
    "Net > ReLU": (2, 0.2, 0.2, 0.1, 0.1),
    "Net > Linear #2": (2, 0.8, 0.8, 0.8, 0.8),
    "(no module)": (0, 0.3, 0.3, 0.1, 0.1),
}


def test_tree_of_a_hand_written_profile():
    roots = module_tree(_two_steps())
    rows = _rows(roots)
    assert list(rows) == list(EXPECTED)
    for key, (count, fs, ft, bs, bt) in EXPECTED.items():
        r = rows[key]
        got = (r.count, r.forward_self_cpu_time_total, r.forward_cpu_time_total,
               r.backward_self_cpu_time_total, r.backward_cpu_time_total)
        assert got == pytest.approx((count, fs, ft, bs, bt)), key
        assert r.forward_backward_cpu_time_total == pytest.approx(ft + bt)
    assert [r.depth for r in rows.values()] == [0, 1, 1, 1, 0]
    assert rows["Net > Linear #2"].module == "  Linear #2"


def _check_invariants(data, roots):
    nodes = flatten(roots)
    modules = [n for n in nodes if n.name != "(no module)"]
    profile_total = data.total_average().self_cpu_time_total
    for clock in ("cpu", "cuda"):
        self_sum = sum(getattr(n, f"self_{clock}_time_total") for n in modules)
        root_sum = sum(getattr(r, f"forward_backward_{clock}_time_total") for r in roots if r.name != "(no module)")
        assert self_sum == pytest.approx(root_sum, rel=1e-9, abs=1e-6)
        everything = sum(getattr(n, f"self_{clock}_time_total") for n in nodes)
        whole = profile_total if clock == "cpu" else data.total_average().self_cuda_time_total
        assert everything == pytest.approx(whole, rel=1e-9, abs=1e-6)
        assert root_sum <= whole + 1e-6
    for n in nodes:
        # A parent's total holds its own self time and its children's totals, nothing twice.
        for phase in ("forward", "backward"):
            total = getattr(n, f"{phase}_cpu_time_total")
            assert total == pytest.approx(getattr(n, f"{phase}_self_cpu_time_total")
                                          + sum(getattr(c, f"{phase}_cpu_time_total") for c in n.children))
            assert total <= profile_total + 1e-6
        assert n.forward_backward_cpu_time_total <= profile_total + 1e-6


def test_invariants_hand_written():
    data = _two_steps()
    _check_invariants(data, module_tree(data))


def test_torch_trace_instances_and_backward():
    data = profiler.load(FIXTURE)
    roots = module_tree(data)
    rows = _rows(roots)
    assert list(rows) == ["Sequential_0", "Sequential_0 > Linear_0", "Sequential_0 > ReLU_0",
                          "Sequential_0 > Linear_1", "(no module)"]
    assert all(rows[k].count == 2 for k in list(rows)[:4])   # two ProfilerSteps
    for key in list(rows)[1:4]:
        assert rows[key].backward_self_cpu_time_total > 0     # AddmmBackward0, ReluBackward0 found their module
    _check_invariants(data, roots)
    # The per-class view of the same attribution: instances are grouped by class.
    classes = {r.module for r in data.module_summary()}
    assert {"Sequential", "Linear", "ReLU"} <= classes
    linear = next(r for r in data.module_summary() if r.module == "Linear")
    assert linear.self_cpu_time_total == pytest.approx(
        rows["Sequential_0 > Linear_0"].self_cpu_time_total + rows["Sequential_0 > Linear_1"].self_cpu_time_total)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_engine_profile_with_modules():
    ag.manual_seed(0)
    net, x = _Net(), ag.randn(4, 8)
    with profiler.profile(with_modules=True) as prof:
        for _ in range(3):
            (net(x) ** 2).mean().backward()
            prof.step()
    data = prof.profile_data
    roots = module_tree(data)
    rows = _rows(roots)
    assert "_Net > _Block #2 > Linear #1" in rows
    assert [k for k in rows if k.startswith("_Net")] == [
        "_Net", "_Net > _Block #1", "_Net > _Block #1 > Linear #1", "_Net > _Block #1 > Linear #2",
        "_Net > _Block #2", "_Net > _Block #2 > Linear #1", "_Net > _Block #2 > Linear #2"]
    assert all(rows[k].count == 3 for k in rows if k != "(no module)")
    for k in rows:
        if k.endswith("Linear #1") or k.endswith("Linear #2"):
            assert rows[k].backward_self_cpu_time_total > 0, k
    _check_invariants(data, roots)


def test_no_module_ranges_gives_an_empty_tree():
    data = from_events([{"name": "mul", "start": 0, "end": 10}])
    assert module_tree(data) == []


def test_nested_json_rows():
    roots = module_tree(_two_steps())
    d = roots[0].to_dict()
    assert d["module"] == "Net" and d["depth"] == 0 and d["count"] == 2
    assert [c["module"] for c in d["children"]] == ["Linear #1", "ReLU", "Linear #2"]
    assert d["children"][2]["path"] == ["Net", "Linear #2"]
    assert d["forward_backward_cpu_time_total"] == pytest.approx(3.3)
