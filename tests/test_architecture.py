"""The house rules, checked on the source: imports go down the floors, never in a circle, and documents the
code cites exist.

The import graph is read with :mod:`ast` from every ``src/cselab`` file, imports inside functions included.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

ROOT = REPO_ROOT
SRC = ROOT / "src"

# What each top-level module or folder of src/cselab may import, declared: an import not listed here fails the test,
# and the declared graph itself must have no cycle, so the allowances are layers without a total order (folders that
# never touch, e.g. losses/ and evaluation/, are not ranked). The ground floor and losses/ import nothing above the
# ground floor.
GROUND = frozenset({"errors", "version", "paths", "fileio", "provenance", "vocabulary", "reporter", "figures"})
# The engine (config ... training) serves both wings; the product (adaptation/, `cselab adapt`) and the research wing
# (research/: recorded runs, seeds, ablations, ensembles, reproduce, the papers' analyses, reports and figures) stand
# side by side on it and never import each other; the entry points (api, cli) stand on both.
ENGINE = frozenset({"config", "runtime", "losses", "models", "st_modules", "data", "export", "teacher", "evaluation",
                    "methods", "training"})
MAY_IMPORT: dict[str, frozenset[str]] = {name: frozenset(targets) for name, targets in {
    "errors": set(), "version": set(), "vocabulary": set(), "reporter": set(), "figures": set(),  # the ground floor
    "paths": {"errors"}, "fileio": {"errors"}, "provenance": {"version"},
    "config": GROUND,
    "runtime": GROUND,
    "losses": GROUND,
    "models": GROUND | {"runtime"},
    "st_modules": GROUND | {"models", "runtime"},
    "data": GROUND | {"config", "models", "runtime"},
    "export": GROUND | {"data", "models", "runtime"},
    "teacher": GROUND | {"data", "export", "models", "runtime"},
    "evaluation": GROUND | {"data", "export", "models", "runtime"},
    "methods": GROUND | {"config", "data", "losses", "models", "runtime", "teacher"},
    "training": GROUND | {"config", "data", "evaluation", "methods", "models", "runtime"},
    "adaptation": GROUND | (ENGINE - {"st_modules"}),
    "research": GROUND | (ENGINE - {"st_modules", "teacher", "export"}),
    "api": GROUND | ENGINE | {"adaptation", "research"},
    "cli": GROUND | ENGINE | {"adaptation", "research"},
    "__init__": GROUND | {"api", "evaluation"},
}.items()}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the cselab modules it imports (``from pkg import submodule`` counts as the submodule)."""
    modules = {module_name(p): p for p in (SRC / "cselab").rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] != "cselab":
                    continue
                targets.append(base)
                targets += [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            elif isinstance(node, ast.Import):
                targets += [a.name for a in node.names if a.name.split(".")[0] == "cselab"]
            for target in targets:
                if target != name and target in modules:
                    graph[name].add(target)
    return graph


def folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each a cycle of the graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    nodes = set(graph) | {t for ts in graph.values() for t in ts}
    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return found


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            if folder(source) != folder(target):
                out[folder(source)].add(folder(target))
    return out


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    # the checks below pass only if this finder can fail
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_files() -> None:
    assert cycles(import_graph()) == []


def test_no_import_cycle_between_folders() -> None:
    assert cycles(folder_graph(import_graph())) == []


def test_every_folder_has_its_allowances() -> None:
    graph = import_graph()
    folders = {folder(m) for m in graph} | {folder(t) for ts in graph.values() for t in ts}
    assert folders <= set(MAY_IMPORT), f"add to MAY_IMPORT: {sorted(folders - set(MAY_IMPORT))}"


def undeclared_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{source} -> {target}" for source, targets in graph.items() for target in targets
                  if folder(source) != folder(target) and folder(target) not in MAY_IMPORT[folder(source)])


def test_imports_are_the_declared_ones() -> None:
    assert undeclared_imports(import_graph()) == []


def test_the_declared_allowances_have_no_cycle() -> None:
    declared = {name: {t for t in targets if t != name} for name, targets in MAY_IMPORT.items()}
    assert cycles(declared) == []
    # the ground floor and losses/ import nothing above the ground floor
    assert all(MAY_IMPORT[name] <= GROUND for name in (*GROUND, "losses"))


def test_the_product_and_the_research_wing_never_import_each_other() -> None:
    assert "research" not in MAY_IMPORT["adaptation"] and "adaptation" not in MAY_IMPORT["research"]
    assert undeclared_imports({"cselab.adaptation.run": {"cselab.research.experiments.ensemble"},
                               "cselab.research.experiments.seeds": {"cselab.adaptation.plan"}}) == [
        "cselab.adaptation.run -> cselab.research.experiments.ensemble",
        "cselab.research.experiments.seeds -> cselab.adaptation.plan"]


def test_an_undeclared_import_would_fail() -> None:
    # the checks above pass only if they can fail: planted imports of training from losses and of the CLI from the
    # ground floor are refused, a declared one is not
    planted = {"cselab.losses.info_nce": {"cselab.training.trainer"}, "cselab.fileio": {"cselab.cli"},
               "cselab.methods.simcse": {"cselab.losses.info_nce"}}
    assert undeclared_imports(planted) == ["cselab.fileio -> cselab.cli",
                                           "cselab.losses.info_nce -> cselab.training.trainer"]



# -- telling the user -------------------------------------------------------------------------------------
# the only parameters that switch a bar per call: a model's encode (sentence-transformers' show_progress_bar) and
# the Python API's documented switches; nothing takes a callback to say things through
PER_CALL_SWITCHES = {("cselab.api", "train"), ("cselab.api", "adapt"), ("cselab.api", "reproduce"),
                     ("cselab.evaluation.domain", "evaluate_domain")}


def reporting_outside_the_reporter(path: Path, name: str) -> list[str]:
    """What in ``path`` (module ``name``) tells the user otherwise than through :mod:`cselab.reporter`: a print,
    tqdm, sys.stdout or sys.stderr, an echo/say/progress parameter (besides a model's encode and
    :data:`PER_CALL_SWITCHES`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"print() at line {node.lineno}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [f"imports {m} at line {node.lineno}" for m in modules if m.split(".")[0] == "tqdm"]
        elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") and \
                isinstance(node.value, ast.Name) and node.value.id == "sys":
            found.append(f"sys.{node.attr} at line {node.lineno}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for arg in arguments:
                allowed = node.name == "encode" or (name, node.name) in PER_CALL_SWITCHES
                if arg.arg in ("echo", "say") or (arg.arg == "progress" and not allowed):
                    found.append(f"{node.name}({arg.arg}=...) at line {node.lineno}")
    return found


def test_the_reporting_finder_finds_planted_ways(tmp_path):
    # the check below passes only if this finder can fail
    planted = tmp_path / "planted.py"
    planted.write_text("import sys\nfrom tqdm.auto import tqdm\n\ndef run(x, *, progress=True, echo=print):\n"
                       "    print(x)\n    sys.stderr.write(x)\n\ndef encode(texts, progress=False):\n    pass\n")
    assert reporting_outside_the_reporter(planted, "cselab.planted") == [
        "imports tqdm.auto at line 2", "run(progress=...) at line 4", "run(echo=...) at line 4",
        "print() at line 5", "sys.stderr at line 6"]
    allowed = tmp_path / "allowed.py"  # the API's documented switch
    allowed.write_text("def train(config, *, progress=True):\n    pass\n")
    assert reporting_outside_the_reporter(allowed, "cselab.api") == []


@pytest.mark.parametrize("path", sorted((SRC / "cselab").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_library_code_tells_the_user_through_the_reporter(path: Path) -> None:
    """Lines through ``report().say``, bars through ``report().bar`` (docs/architecture.md, one owner per concern);
    the command line prints a command's results with click.echo."""
    name = module_name(path)
    if name != "cselab.reporter":
        assert reporting_outside_the_reporter(path, name) == []


# -- documents ---------------------------------------------------------------------------------------
DOC_REFERENCE = re.compile(r"\b([A-Z][A-Z_]+\.md|(?:docs|lab/books)/[\w./-]+\.md)(?:#([\w-]+))?")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    out |= set(re.findall(r'<a (?:name|id)="([\w-]+)"', markdown))
    return out


def _source_files() -> list[Path]:
    files = [*(SRC / "cselab").rglob("*.py"), *(ROOT / "lab").rglob("*.py"), *(ROOT / "configs").rglob("*.yaml")]
    return [f for f in files if "__pycache__" not in f.parts]


@pytest.mark.parametrize("path", _source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_documents_exist(path: Path) -> None:
    for name, anchor in DOC_REFERENCE.findall(path.read_text()):
        target = ROOT / name if name.startswith(("docs/", "lab/books/")) else None
        if target is None:
            candidates = [ROOT / name, ROOT / "docs" / name]
            target = next((c for c in candidates if c.is_file()), candidates[0])
        assert target.is_file(), f"{path.relative_to(ROOT)} cites {name}, which is not in the repository"
        if anchor:
            assert anchor in _anchors(target.read_text()), (f"{path.relative_to(ROOT)} cites {name}#{anchor}: "
                                                            "no such section")


# -- the library and the lab ----------------------------------------------------------------------------
LAB_MENTION = re.compile(r"(?<![\w.])(?:lab|benchmarks)/|^\s*(?:import|from)\s+lab\b", re.M)


def test_the_lab_finder_finds_a_planted_mention():
    # the check below passes only if this pattern can fail
    for text in ("import lab.render\n", "from lab.record import ROOT\n", "see lab/results/x.jsonl",
                 "`benchmarks/a.py`"):
        assert LAB_MENTION.search(text), text
    for text in ("from cselab.data import x\n", "cselab/model", "the lab book", "collab/x"):
        assert not LAB_MENTION.search(text), text


@pytest.mark.parametrize("path", sorted((SRC / "cselab").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_the_library_never_imports_or_names_the_lab(path: Path) -> None:
    """``pip install cselab`` ships src/ alone: nothing in it may import the lab or point users into it."""
    found = [m.group(0) for m in LAB_MENTION.finditer(path.read_text())]
    assert found == [], f"{path.relative_to(ROOT)} names the lab: {found}"


MARKDOWN_LINK = re.compile(r"\]\(([^)\s#]*)(?:#([\w-]+))?\)")


@pytest.mark.parametrize("path", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                                  *sorted((ROOT / "lab").rglob("*.md"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_links_resolve(path: Path) -> None:
    """Every relative link of the README, the docs and the lab books names a file (and a heading) that exists."""
    text = path.read_text()
    for target, anchor in MARKDOWN_LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        linked = (path.parent / target).resolve() if target else path
        assert linked.exists(), f"{path.relative_to(ROOT)} links {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked.read_text()), (f"{path.relative_to(ROOT)} links {target}#{anchor}: "
                                                            "no such heading")
