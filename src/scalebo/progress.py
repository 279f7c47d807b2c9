"""Progress on stderr that suits where stderr goes: a tqdm bar on a terminal, plain lines in a
log.

A tqdm bar redraws itself with carriage returns, which a terminal overwrites and a file keeps:
``2> sweep.log`` would hold hundreds of half-lines. When stderr is not a terminal,
:func:`progress` prints one line each time another ``step`` of the total is done (and at the
end), e.g. ``sweep main: 16/160 cells (10 %), 97 s``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["progress"]


@contextlib.contextmanager
def progress(total: float, desc: str, unit: str, *, step: float = 0.1, enabled: bool = True,
             amount: Callable[[float, float], str] | None = None,
             **tqdm_kwargs: Any) -> Iterator[Callable[[float], None]]:
    """Yield ``advance(n)``, which adds ``n`` units done of ``total``.

    On a terminal this is a tqdm bar (``tqdm_kwargs`` passed on); otherwise a line per
    ``step`` (a fraction of ``total``) crossed, saying ``amount(done, total)`` (default
    ``"16/160 cells (10 %)"``); nothing when ``enabled`` is False.
    """
    stream = sys.stderr
    if not enabled or total <= 0:
        yield lambda n: None
        return
    if stream.isatty():
        from tqdm import tqdm

        with tqdm(total=total, desc=desc, unit=unit, file=stream, **tqdm_kwargs) as bar:
            yield bar.update
        return
    t0, done, shown = time.perf_counter(), 0.0, 0

    def advance(n: float) -> None:
        nonlocal done, shown
        done = min(total, done + n)
        level = int(done / (step * total) + 1e-9)  # steps crossed; the last one is the end
        if level > shown:
            shown = level
            said = (amount(done, total) if amount is not None else
                    f"{done:g}/{total:g} {unit} ({100 * done / total:.0f} %)")
            print(f"{desc}: {said}, {time.perf_counter() - t0:.0f} s", file=stream, flush=True)

    yield advance
