"""Regenerate ``torch_optim_reference.json``: PyTorch's trajectories of the cases in
``torch_optim_cases.py``. Run with PyTorch installed (pinned: 2.13), from the repository root:
``python tests/autograd/data/record_torch_optim.py``. The tests never import torch."""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch_optim_cases as cases  # noqa: E402


def main():
    out = {"torch_version": torch.__version__, "first_order": {}, "lbfgs": {}}
    for name, cls, kw in cases.FIRST_ORDER:
        out["first_order"][name] = cases.run_first_order(torch, cls, kw).tolist()
    for name, cls, kw in cases.WITH_SCHEDULER:
        out["first_order"][name] = cases.run_first_order(torch, cls, kw, scheduler=True).tolist()
    for name, problem, kw in cases.LBFGS_CASES:
        out["lbfgs"][name] = cases.run_lbfgs(torch, problem, kw)
    with open(os.path.join(HERE, "torch_optim_reference.json"), "w") as f:
        json.dump(out, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
