"""cselab.reporter: where a line goes, whether a bar shows, the reporter in effect and its restoration."""

from __future__ import annotations

import pytest

from cselab.reporter import QUIET, Reporter, console, report, reporting


def test_lines_go_where_the_reporter_says():
    said: list[str] = []
    Reporter(lines=said.append).say("one")
    Reporter(lines=said.append, bars=True).say("two")
    assert said == ["one", "two"]


def test_quiet_says_nothing_and_shows_no_bar(capsys):
    QUIET.say("nobody hears this")
    with QUIET.bar(total=3, desc="hidden") as bar:
        bar.update(3)
    assert capsys.readouterr() == ("", "")


def test_the_console_says_lines_on_stdout_and_draws_bars_on_stderr(capsys):
    console().say("a line")
    with console().bar(total=2, desc="counting", unit="thing") as bar:
        bar.update(2)
    out, err = capsys.readouterr()
    assert out == "a line\n"
    assert "counting" in err and "2/2" in err and "a line" not in err


@pytest.mark.parametrize("reporter, show", [(console(bars=False), True), (console(), False),
                                            (console().with_bars(False), True)])
def test_a_bar_is_drawn_only_when_the_reporter_shows_bars_and_the_caller_asks(reporter, show, capsys):
    with reporter.bar(total=2, desc="counting", show=show) as bar:
        bar.update(2)
    reporter.say("still said")
    assert capsys.readouterr() == ("still said\n", "")


def test_with_bars_keeps_where_lines_go():
    said: list[str] = []
    quiet_lines = Reporter(lines=said.append, bars=True).with_bars(False)
    quiet_lines.say("kept")
    assert said == ["kept"] and not quiet_lines.bars
    assert QUIET.with_bars(True).bars and QUIET.with_bars(True).lines is None


def test_the_default_in_effect_is_quiet():
    assert report() is QUIET


def test_reporting_puts_a_reporter_in_effect_and_restores_the_one_before():
    outer, inner = Reporter(lines=print), Reporter(bars=True)
    with reporting(outer) as given:
        assert given is outer and report() is outer
        with reporting(inner):
            assert report() is inner
        assert report() is outer
    assert report() is QUIET


def test_reporting_restores_the_reporter_before_even_on_an_exception():
    outer = Reporter(lines=print)
    with reporting(outer):
        with pytest.raises(RuntimeError, match="boom"), reporting(QUIET.with_bars(True)):
            raise RuntimeError("boom")
        assert report() is outer
    assert report() is QUIET


def test_reporting_takes_a_reporter_only():
    with pytest.raises(TypeError, match="takes a Reporter"), reporting(print):  # type: ignore[arg-type]
        pass
    assert report() is QUIET

