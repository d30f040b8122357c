"""``gradtrace demo``: train a reference workload under the profiler and show where time goes.

One warm-up step runs unprofiled (first calls pay for imports and caches), then ``--steps``
steps run under ``profiler.profile`` with a one-cycle schedule, so each step is a
``ProfilerStep#N`` range. A rich progress bar shows step, loss and step time. Then the operator
table and the forward+backward summary are printed and the profile is saved.
"""
from __future__ import annotations

import time

from .errors import EXIT_INTERRUPTED, CLIError, check_output_path

__all__ = ["cmd_demo", "DEFAULT_STEPS", "resolve_device"]

# Small enough for a few seconds on two CPU cores, large enough for stable tables.
DEFAULT_STEPS = {"mlp": 20, "cnn": 4, "gpt": 4}


def resolve_device(requested: str | None) -> tuple[str, str]:
    """The device to train on and the line that says why.

    Raises:
        CLIError: an unknown device, or cuda without a usable GPU.
    """
    from gradtrace import autograd  # noqa: PLC0415

    gpu = autograd.cuda_is_available()
    if requested is None:
        if gpu:
            return "cuda", "device: cuda (a GPU is usable; --device cpu to compare)"
        return "cpu", "device: cpu (no usable CUDA GPU; pip install -e \".[cuda12]\" on a GPU machine)"
    dev = requested.strip().lower()
    if dev == "cpu":
        return "cpu", "device: cpu"
    if dev == "cuda" or (dev.startswith("cuda:") and dev[5:].isdigit()):
        if not gpu:
            raise CLIError(f"--device {requested}: no usable CUDA GPU here (CuPy finds none); "
                           "use --device cpu, or install the cuda12 extra on a GPU machine")
        try:
            autograd.device(dev)
        except Exception as exc:  # noqa: BLE001 - e.g. cuda:3 on a one-GPU machine
            raise CLIError(f"--device {requested}: {exc}; use --device cuda or cpu") from None
        return dev, f"device: {dev}"
    raise CLIError(f"--device {requested!r}: unknown device; use cpu or cuda (cuda:N)")


def _progress(console):
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,  # noqa: PLC0415
                               TimeElapsedColumn)

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=24),
                    MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
                    TextColumn("step {task.fields[step_ms]} ms"), TimeElapsedColumn(),
                    console=console, transient=False)


def cmd_demo(args) -> int:
    from .main import WORKLOAD_NAMES  # noqa: PLC0415
    from .render import emit, make_console  # noqa: PLC0415
    from .runscript import options_from_args  # noqa: PLC0415
    from .session import Session, default_out  # noqa: PLC0415

    name = args.workload.lower()
    if name not in WORKLOAD_NAMES:
        raise CLIError(f"unknown workload {args.workload!r}; choose one of: {', '.join(WORKLOAD_NAMES)}")
    steps = args.steps if args.steps is not None else DEFAULT_STEPS[name]
    if steps < 1:
        raise CLIError(f"--steps {steps}: give at least 1 step")
    out = check_output_path(args.out) if args.out else default_out(name)
    console, plain = make_console()
    device, why = resolve_device(args.device)
    console.print(why)
    try:
        from gradtrace.autograd.models import make_workload  # noqa: PLC0415
    except ImportError as exc:
        raise CLIError(f"the reference workloads are not available ({exc}); "
                       "upgrade gradtrace (autograd.models)") from None

    workload = make_workload(name, device=device, seed=0)
    console.print(f"workload: {workload!r}, {steps} profiled step(s) after 2 warm-up steps")
    workload.train_step()   # warm-up, not profiled

    # Step 0 runs with the profiler on but is discarded (warm-up), as PyTorch's schedule does.
    options = options_from_args(args, schedule=(0, 1, steps, 1))
    options.activities = ["cpu", "cuda"] if device.startswith("cuda") else ["cpu"]
    session = Session(options, out)
    interrupted = False
    losses = []
    prof = session.start()
    try:
        def one_step() -> tuple[float, float]:
            t0 = time.perf_counter()
            loss = workload.train_step()
            prof.step()
            return loss, (time.perf_counter() - t0) * 1e3

        one_step()          # profiler warm-up step (discarded by the schedule)
        if plain:           # no bar in a log: one line per step
            for k in range(steps):
                loss, ms = one_step()
                losses.append(loss)
                console.print(f"step {k + 1}/{steps}  loss {loss:.4f}  step {ms:.1f} ms")
        else:
            with _progress(console) as progress:
                task = progress.add_task(f"{name} on {device}", total=steps, loss="-", step_ms="-")
                for _ in range(steps):
                    loss, ms = one_step()
                    losses.append(loss)
                    progress.update(task, advance=1, loss=f"{loss:.4f}", step_ms=f"{ms:.1f}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        try:
            paths = session.stop()
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
    if not paths:
        console.print("nothing was recorded")
        return EXIT_INTERRUPTED if interrupted else 1
    data = session.main_data
    if interrupted:
        console.print(f"interrupted after {len(losses)} step(s); partial profile saved to {paths[-1]}")
        return EXIT_INTERRUPTED
    emit(console, demo_report(data, limit=args.limit, plain=plain, width=console.width), plain)
    path = paths[-1]
    console.print(f"\nprofile saved to {path}", soft_wrap=True)
    console.print("next:\n"
                  f"  gradtrace table {path} --group-by {'shape' if args.record_shapes else 'forward-op'}\n"
                  f"  gradtrace view {path}\n"
                  f"  gradtrace export {path} --chrome trace.json.gz", soft_wrap=True)
    return 0


def demo_report(data, limit: int = 15, plain: bool = False, width: int | None = None):
    """The operator table and the forward+backward summary of a demo's profile."""
    from rich.console import Group  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    from .commands import profile_tables  # noqa: PLC0415

    return Group(
        Text(""),
        profile_tables(data, limit=limit, plain=plain, title="Operators (key_averages)", width=width),
        Text(""),
        profile_tables(data, limit=10, group_by="forward-op", plain=plain,
                       title="Forward + backward cost per forward op", width=width),
    )
