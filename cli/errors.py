"""The one error type the CLI shows: a one-line message and exit status 2, no traceback."""
from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["CLIError", "EXIT_USAGE", "EXIT_INTERRUPTED", "load_profile", "check_output_path"]

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CLIError(Exception):
    """Bad input: the message names the problem and what to do about it."""


def load_profile(path: str):
    """``profiler.load`` with every failure turned into a :class:`CLIError`.

    The file is a gradtrace profile or a torch.profiler trace (told apart by content). What
    importing a torch trace repaired or set aside is printed to stderr, one warning per line.
    """
    from gradtrace.profiler import ProfileFormatError, load  # noqa: PLC0415 - no engine import
    from gradtrace.profiler.torch_trace import import_warnings, is_torch_trace  # noqa: PLC0415

    p = Path(path)
    if not p.exists():
        raise CLIError(f"{path}: no such file; give the path of a .gtprof profile (gradtrace demo or "
                       "gradtrace run writes one) or of a torch.profiler trace (.json, .json.gz)")
    if p.is_dir():
        hint = sorted(p.glob("*.gtprof"))
        extra = f", e.g. {hint[-1]}" if hint else ""
        raise CLIError(f"{path}: is a directory; give one profile file inside it{extra}")
    redo = ("re-export it with prof.export_chrome_trace(...)" if is_torch_trace(p)
            else "re-record it with gradtrace run or gradtrace demo")
    try:
        # The stored analysis of a version-5 file is checked on first use: a table the file
        # keeps is shown without reading it (a failed check is one line, see cli.main).
        data = load(p, defer_checks=True)
    except ProfileFormatError as exc:
        raise CLIError(f"{exc}; {redo}") from None
    except MemoryError:
        raise CLIError(f"{path}: not enough memory to load this profile") from None
    except PermissionError:
        raise CLIError(f"{path}: permission denied; check the file's permissions") from None
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise CLIError(f"{path}: not a readable gradtrace profile ({type(exc).__name__}: {exc}); "
                       f"{redo}") from None
    for line in import_warnings(data):
        print(f"warning: {path}: {line}", file=sys.stderr)
    return data


def check_output_path(path: str) -> Path:
    """An output file path whose parent can be created, or a CLIError."""
    p = Path(path)
    if p.is_dir():
        raise CLIError(f"{path}: is a directory; give a file name for the output")
    parent = p.parent
    if parent.exists() and not parent.is_dir():
        raise CLIError(f"{path}: {parent} is not a directory")
    return p
