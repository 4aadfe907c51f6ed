"""User-facing errors.

Anything raised as :class:`CselabError` is a problem with the user's input (a missing file, a bad
config key, an unknown task). The CLI prints its message as one line and exits with status 2; library
callers can catch it like any exception.
"""


class CselabError(Exception):
    """An error caused by user input; its message is one self-explanatory line."""


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; its message says what was kept and how to continue (still a KeyboardInterrupt,
    so library callers that stop on Ctrl-C keep doing so)."""
