"""Time from starting the dashboard process to the Overview drawn (what a visitor sees first),
then every other page, and the server's peak memory.

For each profile (``--kinds``: ``synthetic``, :func:`profiler.synthetic.training_profile`, saved
as version 5; ``torch``, a torch.profiler trace written by
:func:`profiler.synthetic_trace.write_torch_trace` and imported as ``gradtrace import`` does,
with kernels, memcpys, runtime calls and modules) of each size (``--sizes``), this starts
``python -c "viewer.serve(FILE)"`` in a fresh process and, in headless Chromium (started
beforehand, so the browser's own start-up is not counted):

1. opens ``/`` and stops the clock when the Overview is drawn: its root in the page, no
   callback running, every figure plotted — the headline: server up + first page;
2. opens ``/operators`` and waits for the operator grid to show all its rows;
3. opens every other page of ``viewer.app.PAGES`` in tab order, each timed from the URL to
   its figures and grids drawn; on the Timeline it then zooms to 1/2000 of the profile and
   pans by one window, timing each redraw and counting the shapes (bars and line segments)
   the server shipped;
4. reads the server's peak resident memory (VmHWM) once every page has been seen.

Targets (issue 31, a 2-core machine): 38k events <= 3 s, 1M <= 8 s to the first page; 10M:
server up + first page <= 5 s, every page <= 5 s, server <= 1.5 GB, a timeline window <= a
few thousand shapes.

Run: python benchmarks/viewer_load.py [--repeats 1] [--sizes 38k 1M 10M] [--kinds synthetic torch]
     [--keep DIR] [--screenshots]
Writes benchmarks/results/viewer_load.json; with --screenshots (or for 1M/10M on the last
repeat) PNGs of the Overview and the zoomed Timeline beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(os.environ.get("GRADTRACE_BENCH_RESULTS") or ROOT / "benchmarks" / "results")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _serve import free_port, peak_rss_mb, stop, wait_port  # noqa: E402

SIZES = {"38k": (38_000, 3.0), "1M": (1_000_000, 8.0), "10M": (10_000_000, 5.0)}
PAGE_TARGET_S = 5.0
WINDOW_S = 120.0


def make_driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options

    options = Options()
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary is None or shutil.which("chromedriver") is None:
        sys.exit("needs chromium and chromedriver: apt-get install -y chromium chromium-driver")
    options.binary_location = binary
    for arg in ("--headless", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,1000",
                "--enable-unsafe-swiftshader", "--use-angle=swiftshader", "--hide-scrollbars"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options)


ROWS_JS = """
const api = window.dash_ag_grid && dash_ag_grid.getApi && (() => { try { return dash_ag_grid.getApi('ops-grid'); } catch (e) { return null; } })();
const rendered = document.querySelectorAll('#ops-grid .ag-center-cols-container .ag-row').length;
return api ? [api.getDisplayedRowCount(), rendered] : [0, rendered];
"""

# A page is drawn when its root is in the page, no callback is running, every figure has been
# plotted and every grid shows rows (or says it has none).
DRAWN_JS = """
const root = document.querySelector('#page > div[id^="page-"]') || document.querySelector('#page [id^="page-"]');
if (!root || root.id !== arguments[0]) return false;
if (document.querySelector('[data-dash-is-loading="true"]')) return false;
for (const g of root.querySelectorAll('.dash-graph')) {
  const p = g.querySelector('.js-plotly-plot');
  if (!p || !p._fullData || !g.querySelector('.main-svg')) return false;
}
for (const g of root.querySelectorAll('.ag-root-wrapper')) {
  if (!g.querySelector('.ag-row') && !g.querySelector('.ag-overlay-no-rows-center, .ag-overlay-no-rows-wrapper')) return false;
}
return true;
"""

# Shapes the timeline draws: a bar per range, a line segment per three points of a line trace.
SHAPES_JS = """
const gd = document.querySelector('#tl-graph .js-plotly-plot');
if (!gd || !gd._fullData) return null;
let n = 0;
for (const t of gd._fullData) { const k = (t.x || []).length; n += t.type === 'bar' ? k : Math.ceil(k / 3); }
return [n, document.querySelector('#tl-status') ? document.querySelector('#tl-status').innerText : ''];
"""

ZOOM_JS = """
const gd = document.querySelector('#tl-graph .js-plotly-plot');
const r = gd.layout.xaxis.range.map(Number);
const width = (r[1] - r[0]) * arguments[0];
const x0 = r[0] + (r[1] - r[0]) * arguments[1];
Plotly.relayout(gd, {'xaxis.range': [x0, x0 + width]});
"""

PAN_JS = """
const gd = document.querySelector('#tl-graph .js-plotly-plot');
const r = gd.layout.xaxis.range.map(Number);
Plotly.relayout(gd, {'xaxis.range': [r[1], r[1] + (r[1] - r[0])]});
"""


def _wait(cond, what: str, timeout: float = WINDOW_S):
    end = time.time() + timeout
    while time.time() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.01)
    raise TimeoutError(what)


def _page_id(page) -> str:
    return {"/": "page-overview", "/forward-backward": "page-fwdbwd", "/graph": "page-graph"}.get(
        page.PATH, "page-" + page.PATH.strip("/"))


def open_page(driver, base: str, page) -> float:
    """Open one page and wait until it is drawn; its time (s)."""
    t0 = time.perf_counter()
    driver.get(base + page.PATH)
    _wait(lambda: driver.execute_script(DRAWN_JS, _page_id(page)), f"{page.PATH} was not drawn")
    return time.perf_counter() - t0


def timeline_moves(driver) -> dict:
    """Zoom the drawn Timeline to 1/2000 of its span (mid-profile), then pan by one window:
    each redraw's time and the shapes the server shipped."""
    out = {"full_shapes": driver.execute_script(SHAPES_JS)[0]}
    # A relayout in the first moments after the first draw (while the plot sizes itself to the
    # window) can be lost before dcc.Graph reports it: let it settle, and move again when no
    # redraw came (the time is then counted from the move that was answered).
    time.sleep(1.0)
    for name, script, args in (("zoom", ZOOM_JS, (1 / 2000, 0.5)), ("pan", PAN_JS, ())):
        status = driver.execute_script(SHAPES_JS)[1]
        for attempt in range(3):
            t0 = time.perf_counter()
            driver.execute_script(script, *args)
            try:
                _wait(lambda: driver.execute_script(SHAPES_JS)[1] != status and not driver.execute_script(
                    "return !!document.querySelector('[data-dash-is-loading=\"true\"]')"),
                    f"timeline {name} was not redrawn", timeout=30.0)
                break
            except TimeoutError:
                if attempt == 2:
                    raise
        out[f"{name}_s"] = time.perf_counter() - t0
        out[f"{name}_shapes"] = driver.execute_script(SHAPES_JS)[0]
    return out


def one_run(driver, path: Path, expected_rows: int, shots: str | None) -> dict:
    from gradtrace.viewer.app import PAGES

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    code = f"from gradtrace import viewer; viewer.serve({str(path)!r}, port={port})"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        wait_port(port, proc)
        t_port = time.perf_counter() - t0
        overview = open_page(driver, base, PAGES[0])
        out = {"server_ready_s": t_port, "overview_s": overview, "total_s": t_port + overview,
               "rss_after_overview_mb": peak_rss_mb(proc.pid)}
        if shots:
            driver.save_screenshot(str(RESULTS / f"viewer_{shots}_overview.png"))
        t1 = time.perf_counter()
        driver.get(base + "/operators")
        _wait(lambda: (lambda c: c[0] == expected_rows and c[1] > 0)(driver.execute_script(ROWS_JS)),
              "the operator grid did not fill")
        out["operators_grid_s"] = time.perf_counter() - t1
        pages = {}
        for page in PAGES[1:]:
            pages[page.TITLE] = open_page(driver, base, page)
            print(f"  {path.name} {page.TITLE}: {pages[page.TITLE]:.2f} s", flush=True)
            if page.PATH == "/timeline":
                out["timeline"] = timeline_moves(driver)
                if shots:
                    driver.save_screenshot(str(RESULTS / f"viewer_{shots}_timeline_zoomed.png"))
        out["pages_s"] = pages
        out["peak_rss_mb"] = peak_rss_mb(proc.pid)
        return out
    finally:
        stop(proc)


def make_profile(kind: str, n_events: int, folder: Path) -> Path:
    """The ``kind`` profile of ``n_events`` events in ``folder`` (reused when already there)."""
    path = folder / f"{kind}_{n_events}_v5.gtprof"
    if path.exists():
        return path
    from gradtrace import profiler
    from gradtrace.profiler import synthetic
    from gradtrace.profiler.synthetic_trace import write_torch_trace

    if kind == "synthetic":
        synthetic.training_profile(n_events).save(path)
    else:
        trace = folder / f"torch_{n_events}.json"
        write_torch_trace(trace, n_events)
        profiler.load(trace).save(path)
        trace.unlink()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", nargs="*", default=["38k", "1M"], choices=list(SIZES))
    parser.add_argument("--kinds", nargs="+", default=["synthetic"], choices=["synthetic", "torch"])
    parser.add_argument("--keep", metavar="DIR", help="keep the profiles in DIR and reuse them")
    parser.add_argument("--screenshots", action="store_true", help="screenshots of every profile's last run")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from gradtrace import profiler
    from gradtrace.viewer.model import ProfileView

    results = {}
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gradtrace-viewer-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    driver = make_driver()
    try:
        for label in args.sizes:
            n_events, target = SIZES[label]
            for kind in args.kinds:
                path = make_profile(kind, n_events, folder)
                expected = len(ProfileView(profiler.load(path, defer_checks=True)).rows("name"))
                runs = []
                for k in range(args.repeats):
                    last = k == args.repeats - 1
                    shots = f"{kind}_{label}" if last and (args.screenshots or label != "38k") else None
                    runs.append(one_run(driver, path, expected, shots))
                scalar = [key for key, v in runs[0].items() if isinstance(v, (int, float))]
                median = {key: statistics.median(r[key] for r in runs) for key in scalar}
                pages = {p: statistics.median(r["pages_s"][p] for r in runs) for p in runs[0]["pages_s"]}
                slowest = max(pages.values())
                results[f"{kind} {label}"] = {
                    "events": n_events, "file_bytes": path.stat().st_size, "grid_rows": expected,
                    "target_s": target, "runs": runs, **median, "pages_s": pages, "timeline": runs[-1]["timeline"],
                    "meets_target": median["total_s"] <= target and (n_events < 10_000_000 or (
                        slowest <= PAGE_TARGET_S and median["peak_rss_mb"] <= 1536))}
    finally:
        driver.quit()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)

    print(f"{'profile':>14} {'file':>8} {'server up':>9} {'Overview':>8} {'total':>7} {'Operators':>9} "
          f"{'peak RSS':>8}  ok")
    for label, r in results.items():
        print(f"{label:>14} {r['file_bytes'] / 1e6:>6.0f}MB {r['server_ready_s']:>8.2f}s {r['overview_s']:>7.2f}s "
              f"{r['total_s']:>6.2f}s {r['operators_grid_s']:>8.2f}s {r['peak_rss_mb']:>6.0f}MB  "
              f"{'yes' if r['meets_target'] else 'NO'}")
    titles = list(next(iter(results.values()))["pages_s"])
    print(f"\n{'page (s)':>18}" + "".join(f"{label:>16}" for label in results))
    for title in titles:
        print(f"{title:>18}" + "".join(f"{r['pages_s'][title]:>15.2f}s" for r in results.values()))
    for what in ("zoom", "pan"):
        print(f"{'Timeline ' + what:>18}" + "".join(
            f"{r['timeline'][what + '_s']:>8.2f}s {r['timeline'][what + '_shapes']:>6,}" for r in results.values()))
    print(f"{'Timeline (full)':>18}" + "".join(f"{r['timeline']['full_shapes']:>15,} " for r in results.values()))
    out = {"benchmark": "viewer_load", "what": "process start -> Overview drawn, then every page (headless Chromium)",
           "repeats": args.repeats, "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
           "results": results}
    (RESULTS / "viewer_load.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {RESULTS / 'viewer_load.json'} and the screenshots beside it")


if __name__ == "__main__":
    main()
