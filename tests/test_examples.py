"""The code a user copies runs: every Python block of the README and the API's docstring example is executed,
in a fresh directory, against a tiny model standing in for all-MiniLM-L6-v2 (same names, same files).

Only what the README's install step installs is used (sentence-transformers is a dependency)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cselab
from tests.helpers import REPO_ROOT, write_corpus

ROOT = REPO_ROOT


def readme_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def docstring_example() -> str:
    doc = cselab.api.__doc__ or ""
    match = re.search(r"Example[^\n]*::\n\n((?:    .*\n|\n)+)", doc)
    assert match, "the API docstring has an Example:: block"
    return textwrap.dedent(match.group(1))


@pytest.fixture
def user_directory(tmp_path, tiny_bert_dir, sts_home, monkeypatch) -> Path:
    """A working directory as the README's reader has it: the model fetched, a config, the model `cselab adapt`
    handed back in runs/mine (what the README's snippets load)."""
    shutil.copytree(tiny_bert_dir, sts_home / "models" / "all-MiniLM-L6-v2")
    corpus = write_corpus(tmp_path / "my_sentences.txt")
    work = tmp_path / "work"
    work.mkdir()
    (work / "my-config.yaml").write_text(
        "method: simcse\n"
        f"model: {{backbone: all-MiniLM-L6-v2, pooler: mean, max_length: 16}}\n"
        f"data: {{corpus: {corpus}}}\n"
        "train: {output_dir: runs/from-config, batch_size: 8, max_steps: 2, eval_every: 50, lr: 1.0e-3}\n")
    adapted = cselab.adapt(corpus, work / "runs" / "mine", no_teacher=True, steps=2, device="cpu", progress=False)
    assert adapted.model_dir == work / "runs" / "mine" / "model"
    monkeypatch.chdir(work)
    return work


def _run(code: str, work: Path) -> subprocess.CompletedProcess:
    # a fresh interpreter, as a user's script: nothing imported by the tests leaks in
    return subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=600)


def test_the_readme_has_python_examples():
    assert len(readme_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_python_block_runs(user_directory, index):
    result = _run(readme_blocks()[index], user_directory)
    assert result.returncode == 0, result.stderr[-2000:]


def test_api_docstring_example_runs(user_directory):
    result = _run(docstring_example(), user_directory)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (user_directory / "runs" / "from-config" / "best" / "cselab.json").is_file()
