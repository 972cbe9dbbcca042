"""Every example in the documentation runs: the fenced blocks of README.md and docs/*.md.

- Python blocks (```` ```python ````) of a page run in order, in one namespace, in a fresh
  working directory laid out like the repository root, where the docs' relative paths start:
  ``examples/`` and ``../shared/data`` are reachable from it.
- Every ``streammn ...`` command of a shell block (```` ```bash ````, ```` ```console ````)
  must parse with the command's own parser. Most name files of the reader's (``train.parquet``,
  a Kafka topic), so only parsing is checked; a shell block after the line
  ``<!-- docs-test: run -->`` also runs, its commands in order, each exiting 0, in the page's
  working directory and in page order with the Python blocks. Mark only blocks that take
  seconds on files of the repository.
- A Python block after the line ``<!-- docs-test: skip -->`` is compiled but not run. Keep
  these rare: an example that cannot run here is one that can go wrong unseen.

Two checks keep the rest of the docs honest: the API reference (docs/reference/) shows every
class and function ``streammn`` and ``streammn.connectors`` export, and every repository path the
pages name in code quotes exists. (``mkdocs build --strict`` in CI checks links and docstrings.)
"""

from __future__ import annotations

import contextlib
import inspect
import io
import pkgutil
import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from streammn import connectors
import streammn
from helpers.datasets import DATA, ROOT
from streammn.cli import main
from streammn.cli.parser import _parser

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(
    r"(?:^[ ]*<!-- docs-test: (?P<mark>run|skip) -->\n)?"
    r"^(?P<indent>[ ]*)```(?P<lang>\w*)[^\n]*\n(?P<code>.*?)^(?P=indent)```$",
    re.M | re.S,
)
SHELLS = {"bash", "sh", "shell", "console"}
OPERATORS = {"&&", "||", ";", "|", "&"}


@dataclass
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    mark: str | None  # 'run', 'skip' or None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page (fences inside list items too), in page order."""
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("lang")) + 1
        found.append(Block(m["lang"], textwrap.dedent(m["code"]), line, m["mark"]))
    return found


def commands(block: Block) -> list[tuple[list[str], str | None]]:
    """The ``streammn`` commands of a shell block: their arguments and the file their output is
    redirected to (``> rows.data``), or None. Continuation lines are joined, comments and
    ``$`` prompts dropped, and ``a && b`` gives the commands on both sides."""
    found = []
    for line in block.code.replace("\\\n", " ").splitlines():
        if block.lang == "console":
            if not line.startswith("$ "):
                continue  # output shown under the command
            line = line[2:]
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command: list[str] = []
        for token in [*lexer, ";"]:
            if token not in OPERATORS:
                command.append(token)
                continue
            if command[:1] == ["streammn"]:
                out = None
                if ">" in command:
                    at = command.index(">")
                    command, out = command[:at], command[at + 1]
                found.append((command[1:], out))
            command = []
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_marks_sit_on_blocks_they_fit(page):
    """A mark not right above a fence would be ignored: each one must be, on a block of its kind
    (``run`` on a shell block, ``skip`` on a Python block)."""
    marked = [b for b in blocks(page) if b.mark]
    assert page.read_text().count("<!-- docs-test:") == len(marked)
    for block in marked:
        assert (block.lang in SHELLS) == (block.mark == "run"), f"{page.name}:{block.line}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_parses(page):
    parser = _parser()
    failures = []
    for block in blocks(page):
        if block.lang not in SHELLS:
            continue
        for argv, _ in commands(block):
            with contextlib.redirect_stderr(io.StringIO()) as usage:
                try:
                    parser.parse_args(argv)
                except SystemExit:
                    failures.append(f"{page.name}:{block.line}: streammn {shlex.join(argv)}")
                    failures.append(usage.getvalue())
    assert not failures, "\n".join(failures)


def workspace(tmp_path: Path) -> Path:
    """A working directory from which ``examples/`` and ``../shared/data`` are what they are from
    the repository root, so examples that write (snapshots, pictures) write here."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(DATA, target_is_directory=True)
    work = tmp_path / "streammn"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return work


def run_command(argv: list[str], out: str | None, where: str) -> None:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(argv)
    assert code == 0, f"{where}: streammn {shlex.join(argv)} exited {code}"
    if out is not None:
        Path(out).write_text(stdout.getvalue())


RUNNABLE = [p for p in PAGES if any(b.lang == "python" or b.mark == "run" for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(workspace(tmp_path))
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks(page):
        where = f"{page.name}:{block.line}"
        if block.lang == "python":
            # compiled as lines of the page, so a traceback shows the page's file and line
            code = compile("\n" * block.line + block.code, page, "exec")
            if block.mark != "skip":
                exec(code, namespace)
        elif block.lang in SHELLS and block.mark == "run":
            for argv, out in commands(block):
                run_command(argv, out, where)


def test_reference_shows_every_public_name():
    """Each class and function that ``streammn`` and ``streammn.connectors`` export has a ``:::
    name`` entry in docs/reference/ (by any path, or its module rendered whole, as
    streammn.errors)."""
    rendered = set()
    for page in (ROOT / "docs" / "reference").glob("*.md"):
        rendered.update(re.findall(r"^::: (\S+)", page.read_text(), re.M))
    shown = []
    for path in rendered:
        try:
            shown.append(pkgutil.resolve_name(path))
        except (ImportError, AttributeError):
            continue  # a connector whose client is an extra not installed (a wrong path fails
            # the strict docs build, which cannot render it)
    missing = [
        f"{package.__name__}.{name}"
        for package in (streammn, connectors)
        for name in package.__all__
        if (inspect.isclass(obj := getattr(package, name)) or inspect.isfunction(obj))
        and obj.__module__ not in rendered
        and not any(obj is s for s in shown)
    ]
    assert not missing, f"not in the API reference (docs/reference/*.md): {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_named_repository_files_exist(page):
    """A repository path in code quotes (``streammn/trees/criterion.py``) names a file or folder
    that is there: modules move, and the prose pointing at them must follow."""
    named = re.findall(
        r"`((?:streammn|connectors|benchmarks|tests|examples)/[\w./-]*)`", page.read_text()
    )
    assert [path for path in named if not (ROOT / path).exists()] == []


def test_a_role_that_names_nothing_fails_the_strict_build(caplog):
    """The reference's griffe extension warns (so `mkdocs build --strict` fails) on a role
    whose target does not exist, and links an inherited member or a module constant."""
    griffe = pytest.importorskip("griffe")
    import importlib.util

    spec = importlib.util.spec_from_file_location("sphinx_roles", ROOT / "docs/sphinx_roles.py")
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    pkg = griffe.load("streammn", search_paths=[ROOT])
    dtsl, kafka = pkg["dtsl.DTSL"], roles._package("connectors")["kafka.KafkaSource"]
    with caplog.at_level("WARNING", logger=roles.LOG.name):
        assert 'identifier="streammn.dtsl.DTSL.drift_summary"' in roles._link(dtsl, "drift_summary")
        roles._link(kafka, "stop")  # inherited from MessageLogSource
        roles._link(pkg["trees.leaf_counting._routes"], "BY_BITS")  # `A, B = 0, 1`
        roles._link(pkg["trees.leaf_stats.LeafStats.score"], "kernels.score_slots")  # twins()
        roles._link(dtsl, "ValueError")
        assert not caplog.records
        roles._link(dtsl, "no_such_method")
        roles._link(dtsl, "streammn.no_such_module")
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        "the role's target 'no_such_method' names nothing in streammn",
        "the role's target 'streammn.no_such_module' names nothing in streammn",
    ]
