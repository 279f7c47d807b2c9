"""Progress on stderr: a bar on a terminal, one plain line per step in a log file."""

from __future__ import annotations

import io

from scalebo.progress import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_one_plain_line_per_step_and_no_carriage_returns(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    with progress(160, "sweep main", "cells", step=0.1) as advance:
        for _ in range(40):
            advance(4)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 10
    assert lines[0].startswith("sweep main: 16/160 cells (10 %), ")
    assert lines[-1].startswith("sweep main: 160/160 cells (100 %), ")


def test_a_big_jump_prints_once_and_disabled_prints_nothing(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    with progress(100, "replay", "%", step=0.25,
                  amount=lambda done, total: f"{done:.0f} % of the budget") as advance:
        advance(60)  # crosses two steps at once: one line
        advance(60)  # capped at the total
    assert [line.split(",")[0] for line in log.getvalue().splitlines()] == [
        "replay: 60 % of the budget", "replay: 100 % of the budget"]
    with progress(100, "quiet", "cells", enabled=False) as advance:
        advance(100)
    assert "quiet" not in log.getvalue()


def test_a_terminal_gets_a_tqdm_bar(monkeypatch):
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    with progress(10, "sweep x", "cells", mininterval=0) as advance:
        for _ in range(10):
            advance(1)
    assert "\r" in term.getvalue() and "10/10" in term.getvalue()
