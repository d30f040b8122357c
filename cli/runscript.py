"""``gradtrace run``: a user's script as ``__main__`` under the profiler (like ``python -m cProfile``).

The script sees ``sys.argv == [SCRIPT, ARGS...]``, its own directory first on ``sys.path`` and
``__name__ == "__main__"`` (``runpy.run_path``). Its exit status is ours; when it raises, the
traceback is printed as Python would and the partial profile is saved; Ctrl-C saves and exits 130.
"""
from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path

from .errors import EXIT_INTERRUPTED, CLIError, check_output_path

__all__ = ["cmd_run", "options_from_args"]


def options_from_args(args, schedule=None):
    from .session import ProfileOptions  # noqa: PLC0415

    return ProfileOptions(record_shapes=args.record_shapes or args.with_flops, with_stack=args.with_stack,
                          memory=args.memory, with_modules=args.with_modules, with_flops=args.with_flops,
                          schedule=schedule, activities=getattr(args, "activities", None))


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)    # sys.exit("message") prints it and exits 1, as Python does
    return 1


def _print_traceback(exc: BaseException, script: str) -> None:
    """The traceback from the script's first frame on (our frames and runpy's are dropped)."""
    tb = exc.__traceback__
    script_path = os.path.abspath(script)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script_path:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb if tb is not None else exc.__traceback__)


def cmd_run(args) -> int:
    from .session import Session, default_out, parse_schedule  # noqa: PLC0415

    try:
        schedule = parse_schedule(args.schedule) if args.schedule else None
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    script = args.script
    path = Path(script)
    if not path.exists():
        raise CLIError(f"{script}: no such file; give the path of a Python script")
    if path.is_dir():
        raise CLIError(f"{script}: is a directory; give the path of a Python script")
    script_args = list(args.args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    rank_dir = getattr(args, "rank_dir", None)
    if getattr(args, "nproc", None) is not None and rank_dir is None:
        from .launch import run_ranks  # noqa: PLC0415

        return run_ranks(args, script_args)
    if rank_dir is not None:            # one rank of `gradtrace run --nproc N`
        from .launch import ERROR_FILE_ENV, rank_of_this_process  # noqa: PLC0415

        rank = rank_of_this_process()
        out = Path(rank_dir) / f"rank{rank}.gtprof"
        os.environ[ERROR_FILE_ENV] = str(Path(rank_dir) / f"rank{rank}.error")
    else:
        out = check_output_path(args.out) if args.out else default_out(path.stem)
    # The profile is written step by step (a run killed mid-way keeps its completed steps).
    session = Session(options_from_args(args, schedule), out, journal=True)
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script] + script_args
    script_dir = str(path.resolve().parent)
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.insert(0, script_dir)

    status, interrupted, failure = 0, False, None
    try:
        session.start()
    except (ValueError, RuntimeError) as exc:
        raise CLIError(f"cannot start the profiler: {exc}") from None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = _exit_code(exc)
        failure = f"exited with status {status}"
    except KeyboardInterrupt:
        interrupted, status = True, EXIT_INTERRUPTED
        failure = "interrupted"
    except BaseException as exc:  # noqa: BLE001 - the script's own error: show it, keep the profile
        _print_traceback(exc, script)
        status = 1
        failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        try:
            paths = session.stop()
        except KeyboardInterrupt:   # a second Ctrl-C while saving: leave now
            return EXIT_INTERRUPTED
    sys.stdout.flush()
    if rank_dir is not None:
        if status:
            from .launch import rank_failed  # noqa: PLC0415

            rank_failed(rank_dir, rank, status, failure)
        return status
    _report(session, paths, args, status, interrupted)
    return status


def _report(session, paths, args, status: int, interrupted: bool) -> None:
    from .commands import profile_tables  # noqa: PLC0415
    from .render import emit, make_console  # noqa: PLC0415

    err, _ = make_console(stderr=True)
    if not paths:
        hint = (" (the --schedule never reached an active step: does the script call profiler.current().step()?)"
                if args.schedule else "")
        err.print(f"gradtrace: nothing was recorded{hint}; no profile written")
        return
    why = ("interrupted; partial profile" if interrupted else
           f"script exited with status {status}; partial profile" if status else "profile")
    if not args.quiet and not interrupted:
        console, plain = make_console()
        emit(console, profile_tables(session.main_data, limit=15, plain=plain, width=console.width), plain)
    for p in paths:
        err.print(f"gradtrace: {why} saved to {p}")
    dropped = session.dropped_at_stop
    if dropped and dropped[1] > dropped[0]:     # more than the tail after the last step()
        err.print(f"gradtrace: steps {dropped[0]}-{dropped[1]} began a --schedule cycle the script "
                  "did not finish; not saved")
    err.print(f"next: gradtrace table {paths[-1]} --group-by forward-op  |  gradtrace view {paths[-1]}")
