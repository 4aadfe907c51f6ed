"""Command line: thin wrappers that parse arguments, call the library and print, one module per group of
commands (:mod:`.data`, :mod:`.evaluate`, :mod:`.export`, :mod:`.train`, :mod:`.experiments`, :mod:`.adapt`,
:mod:`.analyze`; what they share is in :mod:`.options`). This module makes them one ``cselab`` group.

Every user-input problem surfaces as ONE line ``error: ...`` and exit status 2, never a traceback: option
types carry their ranges, outputs are checked writable before any work, and :func:`main` is the one error
boundary (see :func:`user_error_message` for what counts as the user's problem). ``cselab --debug ...``
(or ``CSELAB_DEBUG=1``) shows the traceback instead; a genuine bug always shows one.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from typing import Any

import click

from cselab.cli.adapt import adapt_command
from cselab.cli.analyze import analyze
from cselab.cli.data import data
from cselab.cli.evaluate import encode_command, eval_command, mteb_command
from cselab.cli.experiments import ablate_command, ensemble_command, report_command, seeds_command
from cselab.cli.export import export_command
from cselab.cli.reproduce import reproduce_command
from cselab.cli.train import config_group, distill_command, presets_command, train_command
from cselab.errors import CselabError
from cselab.reporter import QUIET, console, reporting
from cselab.runtime.launch import is_main_process

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cselab")
@click.option("--debug", is_flag=True, help="show the full traceback of an error")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """cselab: unsupervised contrastive learning of sentence embeddings."""
    # every command tells the user what happens through the console (lines on stdout, bars on stderr) until it
    # ends; a distributed run's other ranks say nothing and show no bar
    ctx.with_resource(reporting(console() if is_main_process() else QUIET))


for _command in (data, eval_command, encode_command, export_command, mteb_command, presets_command, config_group,
                 train_command, distill_command, adapt_command, ensemble_command, analyze, seeds_command,
                 ablate_command, report_command, reproduce_command):
    cli.add_command(_command)


# -- the error boundary ----------------------------------------------------------------------------------
_OS_HINTS = {
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "give a file, not a directory",
    errno.EACCES: "check the permissions",
    errno.EPERM: "check the permissions",
    errno.EROFS: "the file system is read-only; choose another place",
    errno.ENOSPC: "the disk is full; free some space",
    errno.EEXIST: "it is in the way; move it or choose another path",
    errno.ENOTEMPTY: "it is in the way; move it or choose another path",
}


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message of an EXPECTED failure (bad input, a file-system refusal, a damaged or wrongly
    encoded file), or None for anything else: that is a bug, and its traceback is shown."""
    from pydantic import ValidationError

    if isinstance(exc, CselabError):
        return str(exc)
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else ""
        where += f" -> {exc.filename2}" if exc.filename2 is not None else ""
        what = exc.strerror or type(exc).__name__
        hint = _OS_HINTS.get(exc.errno or -1, "check the path and try again")
        return f"{what}: {where}; {hint}" if where else f"{what}; {hint}"
    if isinstance(exc, UnicodeDecodeError):
        return (f"a file is not UTF-8 text ({exc.reason} at byte {exc.start}, {exc.encoding}); "
                "convert it to UTF-8 (e.g. iconv -t UTF-8)")
    if isinstance(exc, json.JSONDecodeError):
        return f"a JSON file is damaged ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"invalid value for {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: list[str] | None = None) -> Any:
    """Console entry point, the one error boundary: an expected failure becomes ``error: <message>`` on one line
    of stderr and exit status 2 (Ctrl-C: what was kept, status 130); with ``--debug`` the traceback is shown."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args[: args.index("--")] if "--" in args else "--debug" in args
    debug = debug or os.environ.get("CSELAB_DEBUG", "") not in ("", "0")
    from cselab.runtime.allocator import bound_onednn_cache, tune_allocator

    tune_allocator()  # before torch allocates anything: big buffers reused from the heap (runtime/allocator.py)
    bound_onednn_cache()  # before torch's first matmul: oneDNN's kernels for 64 shapes kept, not 1,024
    try:
        return cli.main(args=args, prog_name="cselab", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        # click turns Ctrl-C into Abort; the trainer's RunInterrupted (its cause) says what was kept
        cause = exc.__cause__ if isinstance(exc, click.exceptions.Abort) else exc
        message = str(cause) if isinstance(cause, KeyboardInterrupt) and str(cause) else "interrupted"
        click.echo(f"interrupted: {message}" if not message.startswith("interrupted") else message, err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        message = user_error_message(exc)
        if message is None or debug:
            raise
        click.echo(f"error: {_one_line(message)}", err=True)
        sys.exit(EXIT_USAGE)
