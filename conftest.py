"""pytest's root configuration: the fixtures of both test suites (``tests/`` and ``lab/tests/``)."""

pytest_plugins = ["tests.pytest_fixtures"]
