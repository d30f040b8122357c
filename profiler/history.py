"""A run history in SQLite: each run's per-step summaries, for trends, change points and diffs.

``gradtrace runs add`` stores, per profile, what the statistical diff needs and nothing more —
the per-step totals of the step time, each phase, op (self time), module and kernel
(:func:`profiler.stats.step_samples`, on the CPU clock and, when the profile has device
time, on the CUDA clock) — not the trace: ~40 KB a run for a 5-step GPU trace of 100k
events or a 40-step CPU profile (measured), so a thousand runs are tens of megabytes, and
``runs compare`` gives the same verdicts as ``gradtrace diff`` of the two profiles.

Tables (schema version :data:`SCHEMA_VERSION`, kept in ``meta``):

* ``runs``: id, added_at (UTC ISO), source (the file), n_steps, step_median_us, metadata (JSON);
* ``tags``: (run_id, key, value) — ``--tag commit=abc123``;
* ``series``: (id, kind, name) — one per distinct op, module, kernel, phase, the step;
* ``samples``: (run_id, series_id, clock, per_step) — the per-step totals in ns, float64
  little-endian bytes (one BLOB per row instead of a row per step: a run is a few hundred
  rows, read back with one ``frombuffer``).

Several processes may add at once (CI jobs sharing a store on one machine): the database is
in WAL mode, each add is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken at the
start, so two writers never both read then both write), and a connection waits up to
:data:`BUSY_TIMEOUT_S` for the lock instead of failing.
"""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import changepoints, stats

__all__ = ["RunStore", "RunInfo", "HistoryError", "DEFAULT_STORE", "SCHEMA_VERSION", "trend"]

SCHEMA_VERSION = 1
DEFAULT_STORE = os.path.join("gradtrace-runs", "runs.sqlite")
BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, added_at TEXT NOT NULL, source TEXT NOT NULL,
    n_steps INTEGER NOT NULL, step_median_us REAL, metadata TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tags (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL,
    value TEXT NOT NULL, PRIMARY KEY (run_id, key));
CREATE INDEX IF NOT EXISTS tags_by_value ON tags (key, value);
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, UNIQUE (kind, name));
CREATE TABLE IF NOT EXISTS samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    series_id INTEGER NOT NULL REFERENCES series(id), clock TEXT NOT NULL, per_step BLOB NOT NULL,
    PRIMARY KEY (run_id, clock, series_id));
"""


class HistoryError(ValueError):
    """A store that cannot be used, or a run that is not in it: the message is one line."""


@dataclass
class RunInfo:
    """One stored run.

    Attributes:
        id: the run's id (1, 2, ... in the order added).
        added_at: when it was added (UTC, ISO 8601); source: the profile file it came from.
        n_steps: ``ProfilerStep#N`` ranges (samples); step_median_us: their median duration.
        tags: key -> value.
        clocks: the clocks stored ("cpu", and "cuda" for a profile with device time).
    """

    id: int
    added_at: str
    source: str
    n_steps: int
    step_median_us: float | None
    tags: dict = field(default_factory=dict)
    clocks: list = field(default_factory=list)

    def label(self) -> str:
        """``#3 commit=abc123`` — the id and the tags."""
        return f"#{self.id}" + "".join(f" {k}={v}" for k, v in sorted(self.tags.items()))

    def to_dict(self) -> dict:
        return {"id": self.id, "added_at": self.added_at, "source": self.source, "n_steps": self.n_steps,
                "step_median_us": self.step_median_us, "tags": dict(self.tags), "clocks": list(self.clocks)}


class RunStore:
    """A run history file (created on first use, with its folder).

    Args:
        path: the SQLite file (default :data:`DEFAULT_STORE`, relative to the working folder).
        create: False: refuse a store that does not exist yet (reading commands).
    Raises:
        HistoryError: not a SQLite file, not a gradtrace store, or written by a newer gradtrace.
    """

    def __init__(self, path=DEFAULT_STORE, create: bool = True):
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise HistoryError(f"{self.path}: no run store here; add runs with gradtrace runs add FILE "
                                   "(or give --store PATH)")
            if self.path.parent != Path("") and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_dir():
            raise HistoryError(f"{self.path}: is a directory; give the store's file (e.g. {DEFAULT_STORE})")
        try:
            # isolation_level=None: transactions are ours (BEGIN IMMEDIATE ... COMMIT).
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.OperationalError as exc:    # locked past the timeout, read-only, ...
            raise HistoryError(f"{self.path}: cannot use the run store ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path}: not a gradtrace run store ({exc})") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ schema

    def _migrate(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "meta" not in tables:
                raise HistoryError(f"{self.path}: an SQLite file, but not a gradtrace run store (no meta table)")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise HistoryError(f"{self.path}: run store schema version {row[0]} is newer than this "
                                   f"gradtrace's ({SCHEMA_VERSION}); upgrade gradtrace")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    # ------------------------------------------------------------------ writing

    def add(self, data, source: str, tags: dict | None = None) -> int:
        """Store one profile's per-step summaries; returns the new run's id.

        Args:
            data: a :class:`~profiler.data.ProfileData`.
            source: where it came from (the file name), kept for ``runs list``.
            tags: key -> value, e.g. ``{"commit": "abc123", "branch": "main"}``.
        """
        clocks = ["cpu"] + (["cuda"] if data.has_device_time else [])
        per_clock = {clock: stats.step_samples(data, clock) for clock in clocks}
        cpu = per_clock["cpu"]
        median = float(np.median(cpu.step_ns)) / 1e3 if cpu.n_steps else None
        meta = {k: data.metadata.get(k) for k in ("gradtrace_version", "source", "devices", "activities")
                if data.metadata.get(k) is not None}
        meta["clocks"] = clocks
        added_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:   # still locked after BUSY_TIMEOUT_S, read-only, full
            raise HistoryError(f"{self.path}: cannot add a run ({exc})") from None
        try:
            run_id = db.execute("INSERT INTO runs (added_at, source, n_steps, step_median_us, metadata) "
                                "VALUES (?, ?, ?, ?, ?)",
                                (added_at, str(source), cpu.n_steps, median, json.dumps(meta, default=str))).lastrowid
            db.executemany("INSERT INTO tags VALUES (?, ?, ?)",
                           [(run_id, str(k), str(v)) for k, v in (tags or {}).items()])
            for clock, s in per_clock.items():
                for kind in stats.KINDS:
                    if not s.names[kind]:
                        continue
                    ids = self._series_ids(kind, s.names[kind])
                    values = np.ascontiguousarray(s.values[kind].T, dtype="<f8")
                    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?)",
                                   [(run_id, sid, clock, values[j].tobytes()) for j, sid in enumerate(ids)])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return int(run_id)

    def _series_ids(self, kind: str, names: list[str]) -> list[int]:
        self._db.executemany("INSERT OR IGNORE INTO series (kind, name) VALUES (?, ?)", [(kind, n) for n in names])
        known = dict(self._db.execute("SELECT name, id FROM series WHERE kind = ?", (kind,)).fetchall())
        return [known[n] for n in names]

    # ------------------------------------------------------------------ reading

    def runs(self) -> list[RunInfo]:
        """Every run, oldest first."""
        tags: dict[int, dict] = {}
        for run_id, key, value in self._db.execute("SELECT run_id, key, value FROM tags"):
            tags.setdefault(run_id, {})[key] = value
        out = []
        for run_id, added_at, source, n_steps, median, meta in self._db.execute(
                "SELECT id, added_at, source, n_steps, step_median_us, metadata FROM runs ORDER BY id"):
            clocks = json.loads(meta).get("clocks", ["cpu"])
            out.append(RunInfo(run_id, added_at, source, n_steps, median, tags.get(run_id, {}), clocks))
        return out

    def resolve(self, ref: str | int) -> RunInfo:
        """A run by id (``3``, ``#3``), by tag (``commit=abc123``) or by a tag's value (``abc123``);
        the latest run when a tag names several.

        Raises:
            HistoryError: no such run.
        """
        runs = self.runs()
        text = str(ref).strip()
        if text.lstrip("#").isdigit():
            hit = [r for r in runs if r.id == int(text.lstrip("#"))]
        elif "=" in text:
            key, value = text.split("=", 1)
            hit = [r for r in runs if r.tags.get(key) == value]
        else:
            hit = [r for r in runs if text in r.tags.values()]
        if not hit:
            raise HistoryError(f"{self.path}: no run {text!r}; gradtrace runs list shows the ids and tags")
        return hit[-1]

    def samples(self, run: RunInfo | int, clock: str = "cpu") -> stats.StepSamples:
        """A stored run's per-step totals, as :func:`profiler.stats.step_samples` gave them."""
        run_id = run.id if isinstance(run, RunInfo) else int(run)
        n = self._db.execute("SELECT n_steps FROM runs WHERE id = ?", (run_id,)).fetchone()
        if n is None:
            raise HistoryError(f"{self.path}: no run #{run_id}")
        names: dict[str, list[str]] = {k: [] for k in stats.KINDS}
        cols: dict[str, list[np.ndarray]] = {k: [] for k in stats.KINDS}
        for kind, name, blob in self._db.execute(
                "SELECT s.kind, s.name, x.per_step FROM samples x JOIN series s ON s.id = x.series_id "
                "WHERE x.run_id = ? AND x.clock = ? ORDER BY x.rowid", (run_id, clock)):
            names[kind].append(name)
            cols[kind].append(np.frombuffer(blob, dtype="<f8"))
        values = {k: (np.stack(cols[k], axis=1) if cols[k] else np.zeros((int(n[0]), 0))) for k in stats.KINDS}
        return stats.StepSamples(clock, [f"ProfilerStep#{i}" for i in range(int(n[0]))], names, values)

    def series_medians(self, kind: str, name: str, clock: str = "cpu") -> dict[int, float]:
        """run id -> the median per-step time (us) of one series, for the runs that have it."""
        out = {}
        for run_id, blob in self._db.execute(
                "SELECT x.run_id, x.per_step FROM samples x JOIN series s ON s.id = x.series_id "
                "WHERE s.kind = ? AND s.name = ? AND x.clock = ? ORDER BY x.run_id", (kind, name, clock)):
            v = np.frombuffer(blob, dtype="<f8")
            if len(v):
                out[run_id] = float(np.median(v)) / 1e3
        return out

    def series_names(self, kind: str) -> list[str]:
        """The names stored for one kind ("op", "module", ...), sorted."""
        return [r[0] for r in self._db.execute("SELECT name FROM series WHERE kind = ? ORDER BY name", (kind,))]


def trend(store: RunStore, kind: str = "step", name: str = stats.STEP_ROW, clock: str = "cpu") -> dict:
    """One series across the stored runs, with its change points.

    Args:
        kind, name: the series — ("step", "step time"), ("op", "aten::mm"), ("module", ...).
        clock: "cpu" or "cuda".
    Returns:
        ``{"kind", "name", "clock", "runs": [run dict + "median_us"], "change_points":
        [{"index", "before", "after", "ratio", "run_id"}]}``; ``index`` is into ``runs``, the
        runs that have the series (with a positive median), oldest first.
    """
    medians = store.series_medians(kind, name, clock)
    runs = [dict(r.to_dict(), median_us=medians[r.id]) for r in store.runs() if medians.get(r.id, 0.0) > 0]
    cps = changepoints.change_points([r["median_us"] for r in runs])
    return {"kind": kind, "name": name, "clock": clock, "runs": runs,
            "change_points": [dict(c.to_dict(), run_id=runs[c.index]["id"]) for c in cps]}
