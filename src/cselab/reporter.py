"""How cselab tells its user what is happening: one reporter, put in effect by whoever called cselab.

Library code never prints and takes no ``progress``/``echo``/``say`` parameter for it: it says a line with
``report().say("...")`` and shows a progress bar with ``report().bar(total=..., desc=..., unit=...)``. The caller
decides where that goes by putting a :class:`Reporter` in effect for a stretch of code::

    with reporting(console()):       # lines on stdout, bars on stderr
        fetch("sts")

The reporter in effect by default is :data:`QUIET` (no line goes anywhere, no bar shows), so a library call prints
nothing unless its caller asked. The command line puts :func:`console` in effect once for every command (in the
``cselab`` group, ``cselab.cli``); the Python API's documented switches (``cselab.train(progress=...)``,
``SentenceEncoder.encode(show_progress_bar=...)``) put one in effect for their call. A process of a distributed run
other than the main one has :data:`QUIET` in effect (the command line and the trainer see to it).

The reporter in effect is held in a :class:`contextvars.ContextVar`: :func:`reporting` puts one in effect for its
block and restores the one before when the block ends, even on an exception. This module imports nothing from
cselab (it is on the ground floor, docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Reporter:
    """Where a line goes (``lines``: called with each line's text; None: nowhere) and whether progress bars show
    (``bars``; they are tqdm bars on stderr)."""

    lines: Callable[[str], None] | None = None
    bars: bool = False

    def say(self, message: str) -> None:
        """Tell the user ``message`` (one line, no trailing newline)."""
        if self.lines is not None:
            self.lines(message)

    def bar(self, total: int | None = None, *, desc: str = "", unit: str = "it", initial: int = 0,
            show: bool = True) -> Any:
        """A progress bar (tqdm's interface: ``update``, ``set_postfix``, ``close``, ``with``) on stderr when this
        reporter shows bars and ``show`` (a caller's own per-call switch, e.g. ``encode(progress=...)``); otherwise
        a disabled one that draws nothing."""
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, disable=not (self.bars and show),
                    dynamic_ncols=True, file=sys.stderr)

    def with_bars(self, bars: bool) -> Reporter:
        """This reporter with its bars shown or not (its lines go where they went)."""
        return replace(self, bars=bars)


QUIET = Reporter()
"""No line goes anywhere and no bar shows: the default."""


def _print_line(message: str) -> None:
    print(message, file=sys.stdout, flush=True)  # sys.stdout as it is now: a redirection (or pytest's capture) holds


def console(*, bars: bool = True) -> Reporter:
    """Lines on stdout (as ``click.echo`` prints them), bars on stderr unless ``bars`` is false."""
    return Reporter(lines=_print_line, bars=bars)


_IN_EFFECT: contextvars.ContextVar[Reporter] = contextvars.ContextVar("cselab_reporter", default=QUIET)


def report() -> Reporter:
    """The reporter in effect (:data:`QUIET` unless a caller put another in effect with :func:`reporting`)."""
    return _IN_EFFECT.get()


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Put ``reporter`` in effect for the block; the reporter in effect before is back when it ends, however."""
    if not isinstance(reporter, Reporter):
        raise TypeError(f"reporting() takes a Reporter, got {type(reporter).__name__}")
    token = _IN_EFFECT.set(reporter)
    try:
        yield reporter
    finally:
        _IN_EFFECT.reset(token)
