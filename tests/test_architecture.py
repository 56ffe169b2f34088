"""docs/ARCHITECTURE.md stays true: every module it names exists, the layers it draws are the
layers the import statements make, and no modules import each other in a circle.

Every import statement counts: those under ``if TYPE_CHECKING:`` and inside functions too (a
reader follows them as well). A module imports a higher layer or closes a circle -> the test
fails naming it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The layers, top to bottom (docs/ARCHITECTURE.md draws them): a module may import its own layer
# and those below it, never one above. A module belongs to the layer of the longest prefix
# that names it; a module no layer names fails the test (add it here and to the map).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("command line", ("nmt.__main__", "nmt.cli", "nmt.options", "nmt.process")),
    ("Python API", ("nmt.api",)),
    ("localisation files", ("nmt.localisation",)),
    ("export", ("nmt.export",)),
    ("training", ("nmt.training",)),
    ("scoring", ("nmt.evaluate",)),
    ("pictures", ("nmt.pictures",)),
    ("translation", ("nmt.translation",)),
    ("runs", ("nmt.runs",)),
    ("models", ("nmt.models",)),
    ("data", ("nmt.data",)),
    # the config and the text rules it checks values against
    ("config", ("nmt.config", "nmt.data.languages", "nmt.data.normalize",
                "nmt.data.tokenizers", "nmt.data.filters", "nmt.data.spans",
                "nmt.data.span_augment",
                "nmt.arguments", "nmt.setting_ranges", "nmt.toml_files")),
    ("base", ("nmt", "nmt.errors", "nmt.environment", "nmt.files", "nmt.device", "nmt.fast_exit",
              "nmt.stoppable", "nmt.held_signals")),
]


def module_sources(root: Path, package: str) -> dict[str, str]:
    """Dotted module name -> source, for every module of ``package`` under ``root``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path.read_text(encoding="utf-8")
    return out


def imports(name: str, source: str, modules: Iterable[str]) -> set[str]:
    """The modules of ``modules`` that ``source`` (module ``name``) imports, wherever the
    statement is: ``import a.b`` names ``a.b``; ``from a import b`` names the module ``a.b``
    when there is one, else ``a``."""
    known = set(modules)

    def resolve(target: str) -> str:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target

    package = name if any(m.startswith(name + ".") for m in known) else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {resolve(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                found.add(whole if whole in known else resolve(base))
    return found - {"", name}


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + ".") and prefix != "nmt":
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph`` (its strongly connected components of more than one module,
    or a module importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
            if len(component) > 1 or v in graph.get(v, ()):
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def violations(sources: dict[str, str]) -> list[str]:
    """Every module outside the layers, every import of a higher layer, every circle."""
    graph = {name: imports(name, src, sources) for name, src in sources.items()}
    problems = []
    for name in sorted(graph):
        mine = layer_of(name)
        if mine is None:
            problems.append(f"{name}: in no layer (add it to LAYERS and docs/ARCHITECTURE.md)")
            continue
        for target in sorted(graph[name]):
            theirs = layer_of(target)
            if theirs is not None and theirs < mine:
                problems.append(f"{name} ({LAYERS[mine][0]}) imports {target}, a higher layer "
                                f"({LAYERS[theirs][0]})")
    problems += [f"import circle: {' -> '.join(c)}" for c in cycles(graph)]
    return problems


def test_architecture_names_only_existing_modules() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"nmt/[\w/]*\w+\.py", text)) | set(re.findall(r"nmt/[\w/]+/", text))
    assert len(named) > 10
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"docs/ARCHITECTURE.md names what is gone: {missing}"


def test_no_module_imports_a_higher_layer_or_closes_a_circle() -> None:
    problems = violations(module_sources(REPO, "nmt"))
    assert not problems, "\n".join(problems)


def test_every_layer_is_drawn_in_the_map() -> None:
    """The picture in docs/ARCHITECTURE.md names every layer, in this order, each with the
    first of its modules or packages."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    picture = text.split("```")[1]
    rows = [line.split()[0] for line in picture.splitlines() if line.strip()
            and not line.strip().startswith(("|", "+"))]
    drawn = [name for name, _ in LAYERS]
    assert [r for r in rows if r in {n.split()[0] for n in drawn}] == [n.split()[0] for n in drawn]
    for _, prefixes in LAYERS:
        path = prefixes[0].replace(".", "/")
        assert f"{path}.py" in picture or f"{path}/" in picture, path


@pytest.mark.parametrize("low", ["nmt.errors", "nmt.device", "nmt.data.normalize"])
def test_a_low_module_importing_the_api_fails_naming_it(low: str) -> None:
    """The check itself: a lowest-layer module that imports ``nmt.api`` (at the top, inside a
    function, or for types only) is reported with its name; so is a new module in no layer."""
    sources = module_sources(REPO, "nmt")
    for statement in ("from nmt.api import score\n",
                      "def f():\n    import nmt.api\n",
                      "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from nmt import api\n"):
        changed = {**sources, low: sources[low] + "\n" + statement}
        problems = violations(changed)
        assert any(p.startswith(f"{low} (") and "imports nmt.api" in p for p in problems), problems
    assert violations({**sources, "nmt.helpers": ""}) == [
        "nmt.helpers: in no layer (add it to LAYERS and docs/ARCHITECTURE.md)"]


def test_a_circle_is_reported() -> None:
    sources = module_sources(REPO, "nmt")
    changed = {**sources, "nmt.errors": sources["nmt.errors"] + "\nimport nmt.files\n"}
    assert "import circle: nmt.errors -> nmt.files" in violations(changed)


def test_bench_modules_import_each_other_without_circles() -> None:
    sources = module_sources(REPO, "bench")
    graph = {name: imports(name, src, sources) for name, src in sources.items()}
    assert not cycles(graph), cycles(graph)
    nmt_sources = module_sources(REPO, "nmt")
    assert not any("bench" in imports(n, s, [*nmt_sources, "bench"])
                   for n, s in nmt_sources.items())


# --- one owner for a run directory's files ------------------------------------------------------


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are docstrings (documentation may name the files)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _strings(tree: ast.AST) -> Iterable[tuple[int, str]]:
    """Every string the code spells (line, text), an f-string with ``*`` for its values."""
    skip = _docstrings(tree)
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "*"
                                       for v in node.values)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in skip | parts):
            yield node.lineno, node.value


def run_file_spellers(sources: dict[str, str]) -> list[str]:
    """``module:line: "text"`` for each string outside ``nmt.runs`` that spells a run
    directory's file (a name of :data:`nmt.runs.layout.FILE_NAMES`, ``*`` there standing for
    any text) or joins one of its folders (:data:`nmt.runs.layout.FOLDER_NAMES`) to a path."""
    from nmt.runs.layout import FILE_NAMES, FOLDER_NAMES

    names = [re.compile(r"(?<![\w.])" + re.escape(n).replace(r"\*", r"[^\s/'\"]*") + r"(?!\w)")
             for n in FILE_NAMES]
    found = []
    for module, source in sources.items():
        if module == "nmt.runs" or module.startswith("nmt.runs."):
            continue
        tree = ast.parse(source)
        for line, text in _strings(tree):
            if any(n.search(text) for n in names):
                found.append(f"{module}:{line}: {text!r}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                    and isinstance(node.right, ast.Constant) and node.right.value in FOLDER_NAMES):
                found.append(f"{module}:{node.lineno}: / {node.right.value!r}")
    return found


def test_only_the_runs_package_spells_a_run_directorys_files() -> None:
    """``nmt/runs/`` owns the names of what a run directory holds (``nmt.runs.layout``): any
    other module names them through it, so a renamed file is renamed once."""
    found = run_file_spellers(module_sources(REPO, "nmt"))
    assert not found, "spelled outside nmt/runs/ (use nmt.runs.layout):\n" + "\n".join(found)


@pytest.mark.parametrize(("code", "named"), [
    ('p = run / "corpus.json"', "'corpus.json'"),
    ('p = run / f"scores.{tag}.json"', "'scores.*.json'"),
    ('p = run / "checkpoints" / "x"', "/ 'checkpoints'"),
    ('files = glob("scores.test*.json")', "'scores.test*.json'"),
    ('say(f"saved {run}/checkpoints/last.pt")', "'saved */checkpoints/last.pt'"),
])
def test_a_module_spelling_a_run_file_is_named(code: str, named: str) -> None:
    assert run_file_spellers({"nmt.export.x": code}) == [f"nmt.export.x:1: {named}"]


def test_names_like_a_run_files_are_not_taken_for_one() -> None:
    code = 'k = "train.log_every"; t = tok / "tokenizer.json"; d = {"tokenizer": 1}'
    assert run_file_spellers({"nmt.export.x": code}) == []


def test_functions_modules_and_commands_stay_readable_sizes() -> None:
    """No function over 100 lines, no module over 650, and each command of the command line at
    most 40 lines of body: what is longer is split into named parts."""
    import ast

    too_long = []
    for path in sorted((REPO / "nmt").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO)
        if text.count("\n") > 650:
            too_long.append(f"{where}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 100:
                    too_long.append(f"{where}:{node.lineno}: {node.name} is {lines} lines")
    cli = ast.parse((REPO / "nmt" / "cli.py").read_text(encoding="utf-8"))
    for node in cli.body:
        decorated = isinstance(node, ast.FunctionDef) and any(
            isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "command"
            for d in node.decorator_list)
        if decorated:
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
            lines = (body[-1].end_lineno or 0) - body[0].lineno + 1
            if lines > 40:
                too_long.append(f"nmt/cli.py:{node.lineno}: command {node.name} is {lines} lines")
    assert not too_long, "\n".join(too_long)
