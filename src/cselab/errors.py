"""User-facing errors, and the argument checks that the command line and the Python API share.

Two types, one to catch:

* :class:`CselabError`: any problem the user can fix (a missing file, a damaged record, a bad config key, an
  unknown task). The CLI prints its message as one line ``error: ...`` and exits with status 2; library callers
  catch ``CselabError`` for all of them.
* :class:`UsageError`: the subclass for a call or command used wrongly: an argument of the wrong type, out of its
  range, empty, or contradicting another. It is also a ``ValueError``, so code that expects Python's convention
  for a bad argument still works. The CLI and the Python API apply the SAME rules with the same one-line message;
  only the name differs, as the caller wrote it (``--batch-size`` on the command line, ``batch_size`` in Python):
  ``batch_size: 0 is not in the range x>=1`` is the rule of ``Invalid value for '--batch-size': 0 is not in the
  range x>=1``.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any


class CselabError(Exception):
    """An error caused by user input; its message is one self-explanatory line."""


class UsageError(CselabError, ValueError):
    """A function or command called wrongly (an argument's type, range, emptiness or a contradiction); one line."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; its message says what was kept and how to continue (still a KeyboardInterrupt,
    so library callers that stop on Ctrl-C keep doing so)."""


# -- argument checks shared by cli/ and api.py (the wording follows click's, which the CLI prints) ---------
def _range_text(minimum: float | None, maximum: float | None) -> str:
    if maximum is None:
        return f"x>={minimum:g}"
    if minimum is None:
        return f"x<={maximum:g}"
    return f"{minimum:g}<=x<={maximum:g}"


def check_int(value: Any, name: str, *, minimum: int | None = 1, maximum: int | None = None) -> int:
    """``value`` as an int in ``[minimum, maximum]`` (a bool is not an int), else :class:`UsageError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageError(f"{name}: {value!r} is not a valid integer")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise UsageError(f"{name}: {value!r} is not in the range {_range_text(minimum, maximum)}")
    return int(value)


def check_optional_int(value: Any, name: str, *, minimum: int | None = 1, maximum: int | None = None) -> int | None:
    return None if value is None else check_int(value, name, minimum=minimum, maximum=maximum)


def check_number(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """``value`` as a finite float in ``[minimum, maximum]``, else :class:`UsageError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError(f"{name}: {value!r} is not a valid float")
    if not math.isfinite(value):
        raise UsageError(f"{name}: {value!r} is not a finite number")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise UsageError(f"{name}: {value!r} is not in the range {_range_text(minimum, maximum)}")
    return float(value)


def check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{name}: {value!r} is not True or False")
    return value


def check_text(value: Any, name: str, *, optional: bool = False) -> str | None:
    """A non-empty string (``None`` too when ``optional``), else :class:`UsageError`."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{name}: {value!r} is not text")
    if not value.strip():
        raise UsageError(f"{name} is empty")
    return value


def check_path(value: Any, name: str, *, optional: bool = False) -> str | os.PathLike[str] | None:
    """A non-empty ``str`` or ``os.PathLike`` (``None`` too when ``optional``), else :class:`UsageError`."""
    if value is None and optional:
        return None
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise UsageError(f"{name}: {value!r} is not a path or name")
    if not text.strip():
        raise UsageError(f"{name} is empty")
    if "\0" in text:
        raise UsageError(f"{name}: {text!r} holds a NUL byte, which no path can")
    return value


def check_names(value: Any, name: str) -> list[str]:
    """A list of names: a comma-separated string (as on the command line) or a sequence of strings; never empty."""
    if isinstance(value, str):
        names = [t.strip() for t in value.split(",") if t.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        names = [t.strip() for t in value]
        if any(not t for t in names):
            raise UsageError(f"{name}: {list(value)!r} holds an empty name")
    else:
        raise UsageError(f"{name}: {value!r} is not a list of names")
    if not names:
        raise UsageError(f"{name} is empty: give at least one name")
    return names


def refuse_both(a: tuple[str, Any], b: tuple[str, Any], why: str = "") -> None:
    """A :class:`UsageError` when both options are given (truthy): ``--overwrite`` with ``--resume`` and the like."""
    if a[1] and b[1]:
        raise UsageError(f"give {a[0]} or {b[0]}, not both" + (f": {why}" if why else ""))
