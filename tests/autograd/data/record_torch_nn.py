"""Regenerate ``torch_nn_reference.json``: PyTorch's state-dict keys and buffer names of the
modules in ``torch_cases.MODULE_CASES``/``COMPOSITE_CASES`` and the values of
``torch_cases.NUMERIC_CASES``. Run with PyTorch installed (pinned: 2.13), from the repository
root: ``python tests/autograd/data/record_torch_nn.py``. The tests never import torch."""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import torch_cases as cases  # noqa: E402


def _keys(module):
    return {"state_dict": list(module.state_dict().keys()),
            "buffers": [name for name, _ in module.named_buffers()]}


def _json(a):
    return None if a is None else a.tolist()


def main():
    torch.set_default_dtype(torch.float32)
    keys = {}
    for name, args, kwargs in cases.MODULE_CASES:
        keys[cases.case_id(name, args, kwargs)] = _keys(
            cases.build_module(torch.nn, name, args, kwargs))
    for name, build in cases.COMPOSITE_CASES.items():
        keys[name] = _keys(build(torch))
    numeric = {}
    for name in cases.NUMERIC_CASES:
        res = cases.run_numeric_case(name, torch)
        numeric[name] = {"outputs": [_json(o) for o in res["outputs"]],
                         "input_grads": [_json(g) for g in res["input_grads"]],
                         "param_grads": {k: _json(g) for k, g in res["param_grads"].items()}}
    out = {"torch_version": torch.__version__, "keys": keys, "numeric": numeric}
    with open(os.path.join(HERE, "torch_nn_reference.json"), "w") as f:
        json.dump(out, f, indent=0, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
