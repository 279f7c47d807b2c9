"""What a :func:`~scalebo.bench.sweep.run_sweep` call did (:class:`SweepSummary`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from scalebo.bench.records import IgnoredRecord

__all__ = ["SweepSummary"]


@dataclass(frozen=True)
class SweepSummary:
    """What a :func:`run_sweep` call did.

    Attributes:
        total: Cells in the config.
        skipped: Cells with a finished record before the call (not recomputed).
        ran: Cells computed by this call (ok + failed).
        failed: Cells of this call that ended in an error record.
        failures: Failed-cell counts by ``"Type: message"``, most common first.
        seconds: Wall time of the call, seconds.
        n_tasks: Tasks executed (grouped budgets count once).
        out_dir: Record directory.
        paths: Records written by this call.
        corrupt: Record files found unusable (unparsable, truncated, another schema) whose
            cells were therefore pending again, with the reason.
        notes: Distinct record notes of this call (``"<dataset>: <note>"``), shown once.
    """

    total: int
    skipped: int
    ran: int
    failed: int
    failures: tuple[tuple[str, int], ...]
    seconds: float
    n_tasks: int
    out_dir: str
    paths: tuple[str, ...] = field(default=(), repr=False)
    corrupt: tuple[IgnoredRecord, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def cells_per_second(self) -> float:
        """Cells computed per second of wall time (0 when nothing ran)."""
        return self.ran / self.seconds if self.ran and self.seconds > 0 else 0.0

    def describe(self) -> str:
        """A few human-readable lines (the CLI prints them on stderr)."""
        lines = [f"{self.ran} cells run ({self.n_tasks} tasks), {self.skipped} already done, "
                 f"{self.total} in total; {self.seconds:.1f} s, "
                 f"{self.cells_per_second:.2f} cells/s; records in {self.out_dir}"]
        if self.corrupt:
            lines.append(f"{len(self.corrupt)} unusable record file(s) not reused: "
                         + ", ".join(Path(c.path).name for c in self.corrupt))
        if self.notes:
            lines.append(f"{len(self.notes)} note(s) on the data, kept in the records' notes")
        if self.failed:
            lines.append(f"{self.failed} cells failed out of {self.ran}. Errors by message:")
            lines += [f"  {n} × {msg}" for msg, n in self.failures]
        return "\n".join(lines)
