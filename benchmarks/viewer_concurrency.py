"""The dashboard under load: 16 clients rendering every page of one large profile at once.

Starts the server as ``gradtrace view FILE`` does (``cli.main`` -> ``viewer.serve``: waitress),
on a synthetic training profile of 1M events (``profiler.synthetic.training_profile``), and
runs 16 client threads. Each client, for a fixed number of rounds, renders every page the way
the browser does: the page's layout (the routing callback, a ``/_dash-update-component``
POST), then the page's main interactions (grouping, zoom, step, diff...) as further POSTs;
clients start on different pages, so all pages are in flight together. The first round runs
against a server that has just opened its port (cold: analyses being computed, the warm-up
thread racing the clients); the later rounds are warm.

Reported per page: errors (any answer but 200 with a body), p50 and p95 of the page's time
(layout + its interactions), cold and warm; the server's peak RSS. ``--threads`` runs the
server with that many waitress threads (by patching ``create_server``'s argument in the
server process, so the same command measures any gradtrace version); the default is what
``gradtrace view`` uses.

Target (issue 31): 0 errors and p95 <= 2 s per page, warm, with 16 clients.

Run: python benchmarks/viewer_concurrency.py [--events 1000000] [--clients 16] [--rounds 3]
                                             [--threads 4 8 16] [--profile FILE.gtprof]
Writes benchmarks/results/viewer_concurrency.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import RESULTS_DIR, write_json  # noqa: E402
from _serve import free_port, peak_rss_mb, stop, wait_port  # noqa: E402

MAIN = "main"
# Per page: its interactions, as (output "id.prop", the changed input "id.prop", values of
# inputs and states by "id.prop"; the others are None). profile-key is always the main one.
INTERACTIONS = {
    "/": [],
    "/operators": [
        ("ops-grid.rowData", "ops-group.value", {"ops-group.value": "shape", "ops-metric.value": "self",
                                                  "ops-device.value": "cpu", "ops-steps.value": []}),
        ("ops-details.children", "ops-grid.cellClicked", {"ops-grid.cellClicked": {"rowId": "0", "colId": "name"},
                                                          "ops-group.value": "name", "ops-steps.value": []}),
    ],
    "/forward-backward": [
        ("fb-grid.rowData", "fb-by.value", {"fb-by.value": "name", "fb-clock.value": "cpu", "fb-topn.value": 15}),
    ],
    "/modules": [
        ("mod-figure.figure", "mod-phase.value", {"mod-phase.value": "backward", "mod-clock.value": "cpu"}),
    ],
    "/timeline": [
        ("tl-graph.figure", "tl-graph.relayoutData", {"tl-graph.relayoutData": "ZOOM"}),
        ("tl-graph.figure", "tl-step.value", {"tl-step.value": 1}),
    ],
    "/graph": [
        ("gr-cyto.elements", "gr-step.value", {"gr-step.value": 1, "gr-clock.value": "cpu",
                                               "gr-colour-by.value": "self"}),
    ],
    "/memory": [],
    "/compare": [
        ("cmp-body.children", "compare-key.data", {"compare-key.data": MAIN, "cmp-by.value": "name",
                                                    "cmp-metric.value": "self_cpu_time_total", "cmp-steps.value": []}),
    ],
    "/kernels": [
        ("kn-grid.rowData", "kn-group.value", {"kn-group.value": ["op"]}),
    ],
    "/history": [],
    "/ranks": [],
}
PAGE_OUTPUT = "page.children"


def start_server(path: Path, port: int, threads: int | None) -> subprocess.Popen:
    """``gradtrace view FILE --no-browser`` in a new process (threads: waitress's, if given)."""
    patch = ""
    if threads:
        patch = ("import waitress.server as w; _c = w.create_server; "
                 f"w.create_server = lambda app, **kw: _c(app, **dict(kw, threads={threads})); ")
    code = (patch + "from gradtrace.cli.main import main; "
            f"main(['view', {str(path)!r}, '--no-browser', '--port', '{port}'])")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Client:
    """Builds callback requests from the app's ``/_dash-dependencies``, as the renderer does."""

    def __init__(self, base: str, dependencies: list, zoom_ms: tuple[float, float]):
        self.base = base
        self.session = requests.Session()
        self.zoom = {"xaxis.range[0]": zoom_ms[0], "xaxis.range[1]": zoom_ms[1]}
        self.by_output = {}
        for dep in dependencies:
            for out in dep["output"].strip(".").split("..."):
                self.by_output.setdefault(out, dep)

    def post(self, output: str, changed: str, values: dict) -> bool:
        dep = self.by_output[output]
        key = dep["output"]
        outs = [dict(zip(("id", "property"), o.rsplit(".", 1))) for o in key.strip(".").split("...")]

        def value(item):
            name = f"{item['id']}.{item['property']}"
            if name == "profile-key.data":
                return MAIN
            v = values.get(name)
            return self.zoom if v == "ZOOM" else v

        body = {"output": key, "outputs": outs if key.startswith("..") else outs[0],
                "inputs": [dict(i, value=value(i)) for i in dep["inputs"]],
                "state": [dict(s, value=value(s)) for s in dep["state"]],
                "changedPropIds": [changed]}
        try:
            res = self.session.post(self.base + "/_dash-update-component", json=body, timeout=600)
        except requests.RequestException:
            return False
        return res.status_code == 200 and bool(res.content)

    def page(self, path: str) -> tuple[float, int]:
        """Render one page: (seconds, errors)."""
        t0 = time.perf_counter()
        errors = 0 if self.post(PAGE_OUTPUT, "url.pathname", {"url.pathname": path}) else 1
        for output, changed, values in INTERACTIONS[path]:
            errors += 0 if self.post(output, changed, values) else 1
        return time.perf_counter() - t0, errors


def run_load(path: Path, clients: int, rounds: int, threads: int | None, zoom_ms) -> dict:
    port = free_port()
    t0 = time.perf_counter()
    proc = start_server(path, port, threads)
    try:
        wait_port(port, proc, timeout=300.0)
        up_s = time.perf_counter() - t0
        base = f"http://127.0.0.1:{port}"
        deps = requests.get(base + "/_dash-dependencies", timeout=60).json()
        pages = list(INTERACTIONS)
        samples = {p: {"cold": [], "warm": []} for p in pages}
        errors = {p: 0 for p in pages}
        lock = threading.Lock()

        def client(k: int):
            c = Client(base, deps, zoom_ms)
            for r in range(rounds):
                for j in range(len(pages)):
                    p = pages[(k + j) % len(pages)]     # clients start on different pages
                    dt, err = c.page(p)
                    with lock:
                        samples[p]["cold" if r == 0 else "warm"].append(dt)
                        errors[p] += err

        started = time.perf_counter()
        workers = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.perf_counter() - started
        rss = peak_rss_mb(proc.pid)
    finally:
        stop(proc)
    per_page = {}
    for p in pages:
        row = {"errors": errors[p]}
        for phase in ("cold", "warm"):
            xs = sorted(samples[p][phase])
            if xs:
                row[f"{phase}_p50_s"] = statistics.median(xs)
                row[f"{phase}_p95_s"] = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
        per_page[p] = row
    warm_all = sorted(x for p in pages for x in samples[p]["warm"])
    return {"threads": threads or "default", "server_up_s": up_s, "wall_s": wall, "peak_rss_mb": rss,
            "errors": sum(errors.values()), "pages": per_page,
            "warm_p50_s": statistics.median(warm_all) if warm_all else None,
            "warm_p95_s": warm_all[int(round(0.95 * (len(warm_all) - 1)))] if warm_all else None,
            "worst_warm_page_p95_s": max((r.get("warm_p95_s", 0) for r in per_page.values()), default=None)}


def print_result(result: dict) -> None:
    print(f"\nwaitress threads: {result['threads']} · server up {result['server_up_s']:.1f} s · "
          f"{result['wall_s']:.0f} s for all rounds · peak RSS {result['peak_rss_mb']:.0f} MB · "
          f"errors {result['errors']}")
    print(f"{'page':>18} {'errors':>6} {'cold p50':>9} {'cold p95':>9} {'warm p50':>9} {'warm p95':>9}")
    for p, r in result["pages"].items():
        cells = [f"{r[k]:>8.2f}s" if k in r else f"{'-':>9}" for k in ("cold_p50_s", "cold_p95_s",
                                                                        "warm_p50_s", "warm_p95_s")]
        print(f"{p:>18} {r['errors']:>6} " + " ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every page per client (the first is cold)")
    parser.add_argument("--threads", type=int, nargs="*", default=[0],
                        help="waitress threads to try (0: gradtrace view's own)")
    parser.add_argument("--profile", help="a saved profile to serve instead of a synthetic one")
    parser.add_argument("--label", default="", help="a name for this run in the JSON (e.g. 'before')")
    args = parser.parse_args()

    from gradtrace.profiler import load, synthetic

    tmp = tempfile.mkdtemp(prefix="gradtrace-concurrency-")
    if args.profile:
        path = Path(args.profile)
        data = load(path)
    else:
        data = synthetic.training_profile(args.events)
        path = Path(tmp) / f"synthetic_{args.events}.gtprof"
        data.save(path)
    cols = data.event_columns
    origin = int(cols["start_ns"].min())
    span = int(cols["end_ns"].max()) - origin
    zoom_ms = (0.40 * span / 1e6, 0.42 * span / 1e6)      # a 2% window in the middle
    n_events = data.n_events
    del data, cols

    runs = []
    for threads in args.threads:
        result = run_load(path, args.clients, args.rounds, threads or None, zoom_ms)
        print_result(result)
        runs.append(result)
    write_json(os.path.join(RESULTS_DIR, f"viewer_concurrency{('_' + args.label) if args.label else ''}.json"), {
        "benchmark": "viewer_concurrency", "label": args.label, "events": n_events, "clients": args.clients,
        "rounds": args.rounds, "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
        "target": "0 errors, p95 <= 2 s per page (warm)", "runs": runs})


if __name__ == "__main__":
    main()
