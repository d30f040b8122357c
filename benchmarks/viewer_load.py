"""Time from starting the dashboard process to the Operators page fully rendered, and the
server's peak memory.

For synthetic training profiles of 38,000 and 1,000,000 events (profiler.synthetic; 10M with
``--sizes 38k 1M 10M``), this
starts ``python -c "viewer.serve(FILE)"`` in a fresh process, opens ``/operators`` in headless
Chromium (started beforehand, so the browser's own start-up is not counted) and stops the
clock when the operator grid shows all its rows. Median of a few runs. The server's peak RSS
(VmHWM) is read once the page is drawn.

Targets: <= 3 s (38k events), <= 8 s (1M events); 10M events: <= 5 s to server up + first
page and <= 1.5 GB (issue 31).

Run: python benchmarks/viewer_load.py [--repeats 3] [--sizes 38k 1M 10M]
Writes benchmarks/results/viewer_load.json and a screenshot of the 1M-event page.
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


def one_run(driver, path: Path, expected_rows: int, screenshot: Path | None) -> dict:
    port = free_port()
    code = f"from gradtrace import viewer; viewer.serve({str(path)!r}, port={port})"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        wait_port(port, proc)
        t_port = time.perf_counter() - t0
        driver.get(f"http://127.0.0.1:{port}/operators")
        end = time.time() + 60
        while time.time() < end:
            count, rendered = driver.execute_script(ROWS_JS)
            if count == expected_rows and rendered > 0:
                break
            time.sleep(0.01)
        else:
            raise TimeoutError("the operator grid did not fill")
        total = time.perf_counter() - t0
        rss_mb = peak_rss_mb(proc.pid)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(screenshot))
        return {"total_s": total, "server_ready_s": t_port, "page_s": total - t_port, "peak_rss_mb": rss_mb}
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", nargs="*", default=["38k", "1M"], choices=list(SIZES))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from gradtrace.profiler import synthetic
    from gradtrace.viewer.model import ProfileView

    results = {}
    tmp = Path(tempfile.mkdtemp(prefix="gradtrace-viewer-bench-"))
    driver = make_driver()
    try:
        for label in args.sizes:
            n_events, target = SIZES[label]
            data = synthetic.training_profile(n_events)
            path = tmp / f"synthetic_{label}.gtprof"
            data.save(path)
            expected = len(ProfileView(data).rows("name"))
            del data        # the server loads the file; this process need not hold it
            runs = []
            for k in range(args.repeats):
                shot = RESULTS / f"viewer_load_{label}.png" if (label != "38k" and k == args.repeats - 1) else None
                runs.append(one_run(driver, path, expected, shot))
            median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            results[label] = {"events": n_events, "file_bytes": path.stat().st_size, "grid_rows": expected,
                              "target_s": target, "runs": runs, **median,
                              "meets_target": median["total_s"] <= target}
    finally:
        driver.quit()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{'profile':>8} {'events':>10} {'file':>9} {'rows':>6} {'server up':>10} {'page':>8} "
          f"{'total':>8} {'target':>7} {'peak RSS':>9}  ok")
    for label, r in results.items():
        print(f"{label:>8} {r['events']:>10,} {r['file_bytes'] / 1e6:>7.1f}MB {r['grid_rows']:>6} "
              f"{r['server_ready_s']:>9.2f}s {r['page_s']:>7.2f}s {r['total_s']:>7.2f}s "
              f"{r['target_s']:>6.1f}s {r['peak_rss_mb']:>7.0f}MB  {'yes' if r['meets_target'] else 'NO'}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"benchmark": "viewer_load", "what": "process start -> Operators page grid filled (headless Chromium)",
           "repeats": args.repeats, "cpu_count": os.cpu_count(), "python": sys.version.split()[0],
           "screenshots": [os.path.relpath(RESULTS / f"viewer_load_{k}.png", ROOT) for k in results if k != "38k"],
           "results": results}
    (RESULTS / "viewer_load.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {RESULTS / 'viewer_load.json'} and the screenshots beside it")


if __name__ == "__main__":
    main()
