"""JSON-lines files: the one reader and the one appender of cselab's records and logs.

* :func:`read_jsonl` reads a file against a schema: every line is checked before any is used, and a bad one is
  refused as one line that names the file, the line and the field (``r.jsonl:3: field 'seed' is not a whole
  number``). A :class:`Schema` lists the fields a kind of line may have and the check of each; fields it does not
  list pass (records carry provenance and more). A nested object is a :class:`Schema` itself. The schemas of
  cselab's records (results, seeds, ablation) are in :mod:`cselab.training.records`; the zero-shot evaluation
  rows' in :mod:`cselab.evaluation.mteb_adapter`.
* :func:`read_log` reads a log a run writes as it goes (``metrics.jsonl``), where a kill may have cut the last line:
  such a line is skipped, not refused.
* :func:`append_jsonl` appends one record as one line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cselab.errors import CselabError

# a check returns None when the value is fine, else (where inside the value, what is wrong): ("", "is not text"),
# (".stsb", "is not a number") for a value of a mapping, ("[2]", "is not text") for an item of a list
Problem = tuple[str, str]
Check = Callable[[Any], Problem | None]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def whole(minimum: int | None = 0) -> Check:
    """An int (not a bool) of at least ``minimum``."""
    def check(value: Any) -> Problem | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "", "is not a whole number"
        if minimum is not None and value < minimum:
            return "", f"is {value}, below {minimum}"
        return None
    return check


def number(minimum: float | None = None, maximum: float | None = None) -> Check:
    """A finite int or float (not a bool) in ``[minimum, maximum]``."""
    def check(value: Any) -> Problem | None:
        if not _is_number(value):
            return "", "is not a number"
        if minimum is not None and value < minimum:
            return "", (f"is {value:g}, below {minimum:g}" if maximum is None
                        else f"is {value:g}, outside [{minimum:g}, {maximum:g}]")
        if maximum is not None and value > maximum:
            return "", (f"is {value:g}, above {maximum:g}" if minimum is None
                        else f"is {value:g}, outside [{minimum:g}, {maximum:g}]")
        return None
    return check


def flag() -> Check:
    """A check that a value is true or false."""
    return lambda value: None if isinstance(value, bool) else ("", "is not true or false")


def text(*, empty: bool = True) -> Check:
    """A string (a non-empty one unless ``empty``)."""
    def check(value: Any) -> Problem | None:
        if not isinstance(value, str):
            return "", "is not text"
        if not empty and not value.strip():
            return "", "is empty"
        return None
    return check


def one_of(*values: str) -> Check:
    def check(value: Any) -> Problem | None:
        return None if value in values else ("", f"is {value!r}, not one of: {', '.join(values)}")
    return check


def nullable(inner: Check) -> Check:
    """``inner``, or null."""
    return lambda value: None if value is None else inner(value)


def list_of(item: Check) -> Check:
    def check(value: Any) -> Problem | None:
        if not isinstance(value, list):
            return "", "is not a list"
        for i, element in enumerate(value):
            problem = item(element)
            if problem is not None:
                return f"[{i}]{problem[0]}", problem[1]
        return None
    return check


def mapping(values: Check | None = None) -> Check:
    """A JSON object whose every value passes ``values`` (any values when None)."""
    def check(value: Any) -> Problem | None:
        if not isinstance(value, dict):
            return "", "is not an object"
        for key, element in value.items():
            problem = values(element) if values is not None else None
            if problem is not None:
                return f".{key}{problem[0]}", problem[1]
        return None
    return check


@dataclass(frozen=True)
class Schema:
    """The fields of one kind of JSON object: ``fields`` name -> check (or a nested :class:`Schema`);
    ``required`` must be present and not null; an optional field may be null or absent."""

    kind: str
    fields: dict[str, Check | Schema] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def __call__(self, value: Any) -> Problem | None:
        """The first problem of ``value`` (a nested schema is a check like any other)."""
        if not isinstance(value, dict):
            return "", "is not an object"
        for name in self.required:
            if value.get(name) is None:
                return f".{name}", "is missing"
        for name, check in self.fields.items():
            if value.get(name) is not None:
                problem = check(value[name])
                if problem is not None:
                    return f".{name}{problem[0]}", problem[1]
        return None

    def with_required(self, kind: str, *names: str, **fields: Check | Schema) -> Schema:
        """This schema under another name, with more required fields and more (or other) field checks."""
        return Schema(kind, {**self.fields, **fields}, tuple(dict.fromkeys((*self.required, *names))))


def line_problem(schema: Schema, value: Any) -> str | None:
    """What is wrong with one parsed line, in words (``field 'seed' is not a whole number``), or None."""
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    problem = schema(value)
    if problem is None:
        return None
    where, what = problem
    return f"field {where.lstrip('.')!r} {what}"


def read_jsonl(path: str | Path, schema: Schema, *, what: str | None = None) -> list[dict[str, Any]]:
    """Every line of ``path`` (blank lines skipped) as a dict checked against ``schema``; a file that is missing,
    not UTF-8, or holds a line that is not such an object is refused naming the file and the line."""
    path = Path(path)
    what = what or f"{schema.kind} file"
    if not path.is_file():
        raise CselabError(f"{what} not found: {path}")
    try:
        content = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CselabError(f"{path} is not UTF-8 text (byte {exc.start}); a {what} is UTF-8 JSON lines") from None
    rows = []
    for lineno, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:  # json.JSONDecodeError; also numbers too large to parse
            message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise CselabError(f"{path}:{lineno}: not a JSON record ({message})") from None
        problem = line_problem(schema, value)
        if problem is not None:
            raise CselabError(f"{path}:{lineno}: {problem} (not a valid {schema.kind} record)")
        rows.append(value)
    return rows


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a log that a run appends to as it goes (``metrics.jsonl``), in order; a line that is not
    a JSON object (cut by a kill) or a missing file gives nothing."""
    try:
        content = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    rows = []
    for line in content.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            rows.append(value)
    return rows


def append_jsonl(path: str | Path, record: dict[str, Any], *, unless_present: bool = False) -> bool:
    """Append ``record`` to ``path`` as one line (the directory is made if missing); ``unless_present``: not when the
    file already holds exactly this line (a rerun never records a result twice). Returns whether it was written.
    One write of one line with O_APPEND: processes appending to one file at once do not interleave their lines."""
    path = Path(path)
    line = json.dumps(record)
    if unless_present and path.is_file():
        with open(path, encoding="utf-8", errors="replace") as f:
            if any(existing.rstrip("\n") == line for existing in f):
                return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return True
