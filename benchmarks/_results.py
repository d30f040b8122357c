"""What every benchmark script does last: write its result as JSON and say where."""
from __future__ import annotations

import json
import os

# ``gradtrace bench`` points this at a temporary folder unless asked to keep the results
# (``--save``), so a smoke run never writes into the checkout.
RESULTS_ENV = "GRADTRACE_BENCH_RESULTS"
RESULTS_DIR = os.environ.get(RESULTS_ENV) or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def write_json(path: str, result: dict) -> dict:
    """Write ``result`` to ``path`` (making its folder), print the path, return the result."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2, default=str)
    print(f"wrote {path}")
    return result
