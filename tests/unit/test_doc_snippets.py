"""The code in the docs works as shown.

Every fenced block of README.md, docs/*.md and docs/adr/*.md is collected with the line of its
opening fence, so a failure names `docs/x.md:123`.

- ```python blocks run. A block that needs a running hub says so with
  `<!-- snippet: needs-server -->` on the line right before its fence; it is only compiled, and
  its imports run, so a renamed module or class still fails.
- ```sh, ```bash, ```shell and ```console blocks, and the `hub` lines of ```yaml blocks (CI
  jobs): every command that runs `hub` must name a command of the CLI, only options that command
  has, and a number of arguments it takes. Values are not checked, so placeholders are fine.
  Every `HUB_*` variable in them must be one the hub reads.
"""

import ast
import importlib
import math
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import typer
from pydantic_settings import BaseSettings
from typer.core import TyperArgument, TyperGroup, TyperOption

from hub_cli.config_commands import DIRECT_VARIABLES, cli_variables
from hub_cli.main import app
from tests.conftest import REPO

pytestmark = pytest.mark.unit

DOCS = [REPO / "README.md", *sorted(REPO.glob("docs/*.md")), *sorted(REPO.glob("docs/adr/*.md"))]
SHELL = {"sh", "bash", "shell", "console"}
NEEDS_SERVER = "needs-server"
MARKERS = {NEEDS_SERVER}
# Read from the environment directly, not through a settings class: the state directory
# (hub_core.settings.default_home) and the logging set-up (hub_cli.logs).

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_MARKER = re.compile(r"<!--\s*snippet:\s*(?P<name>[\w-]+)\s*-->")
_CODE_SPAN = re.compile(r"`[^`]*`")
_VARIABLE = re.compile(r"\bHUB_[A-Z0-9_]*[A-Z0-9]\b")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_PLACEHOLDER = re.compile(r"<([A-Za-z][\w.-]*)>")
_YAML_HUB_LINE = re.compile(r"^\s*(?:-\s+)?(?:run:\s+)?(?P<command>hub\s.*)$")
# Words that run the command after them.
_WRAPPERS = {"env", "exec", "nohup", "sudo", "time"}


class Block(NamedTuple):
    """One fenced block: where it is, its language, the marker before it and its text."""

    doc: str
    line: int  # of the opening fence
    language: str
    marker: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def _blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text().splitlines()
    doc = path.relative_to(REPO).as_posix()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        start, body = index, []
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if closing and closing["fence"].startswith(fence) and not closing["info"]:
                break
            # Inside a list item the body is indented as its fence is.
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        marker = _MARKER.fullmatch(lines[start - 1].strip()) if start else None
        yield Block(
            doc=doc,
            line=start + 1,
            language=opening["info"].lower(),
            marker=marker["name"] if marker else None,
            text="\n".join(body) + "\n",
        )
        index += 1


BLOCKS = [block for path in DOCS for block in _blocks(path)]
PYTHON = [block for block in BLOCKS if block.language in {"python", "py"}]
COMMANDS = [block for block in BLOCKS if block.language in SHELL | {"yaml"}]


# --- the CLI ------------------------------------------------------------------------------


def _command_tree() -> TyperGroup:
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    return root


ROOT = _command_tree()


def _subcommands(group: TyperGroup) -> dict[str, Any]:
    context = typer.Context(group)
    return {name: group.get_command(context, name) for name in group.list_commands(context)}


def _options(command: Any) -> dict[str, TyperOption]:
    """Each spelling of each option (`--demo`, `--no-demo`, `-n`), --help included."""
    found: dict[str, TyperOption] = {}
    for param in command.get_params(typer.Context(command)):
        if isinstance(param, TyperOption):
            found.update(dict.fromkeys([*param.opts, *param.secondary_opts], param))
    return found


def _takes_value(option: TyperOption) -> bool:
    return not (option.is_flag or option.count)


def check_hub_command(words: list[str]) -> list[str]:
    """What is wrong with `hub <words>`: unknown commands and options, too many or too few
    arguments. Empty when the CLI would accept its shape."""
    command: Any = ROOT
    path = ["hub"]
    rest = list(words)
    while isinstance(command, TyperGroup):
        options = _options(command)
        while rest and rest[0].startswith("-"):
            given = rest.pop(0).split("=", 1)[0]
            if given == "--help":
                return []
            if given not in options:
                return [f"`{' '.join(path)}` has no option {given}"]
        if not rest:
            return [f"`{' '.join(path)}` is a group: name one of its commands"]
        name = rest.pop(0)
        subcommands = _subcommands(command)
        if name not in subcommands:
            return [f"`{' '.join(path)}` has no command {name!r}; it has: {sorted(subcommands)}"]
        command = subcommands[name]
        path.append(name)

    problems = []
    options = _options(command)
    positional = 0
    index = 0
    while index < len(rest):
        word = rest[index]
        index += 1
        if word == "--":
            positional += len(rest) - index
            break
        if not word.startswith("-") or word == "-":
            positional += 1
            continue
        name, _, attached = word.partition("=")
        option = options.get(name)
        short = None if name.startswith("--") else options.get(name[:2])
        if option is None and short is not None and _takes_value(short):
            continue  # a short option with its value attached: `-n5`
        if option is None:
            problems.append(f"`{' '.join(path)}` has no option {name}; it has: {sorted(options)}")
        elif option.name == "help":
            return []
        elif _takes_value(option) and not attached:
            index += option.nargs

    if problems:
        return problems  # an unknown option may take a value: the arguments cannot be counted
    arguments = [
        p for p in command.get_params(typer.Context(command)) if isinstance(p, TyperArgument)
    ]
    least = sum(max(p.nargs, 1) for p in arguments if p.required)
    most = math.inf if any(p.nargs < 0 for p in arguments) else sum(p.nargs for p in arguments)
    if not least <= positional <= most:
        names = " ".join(str(p.name).upper() for p in arguments) or "no arguments"
        problems.append(f"`{' '.join(path)}` takes {names}, got {positional} argument(s)")
    return problems


def _settings_classes() -> list[type[BaseSettings]]:
    """Every pydantic-settings class in the hub's packages (their `*settings.py` modules)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [pattern.removesuffix("*") for pattern in patterns]
    for package in packages:
        for module in (REPO / package).rglob("*settings.py"):
            importlib.import_module(".".join(module.relative_to(REPO).with_suffix("").parts))
    found, pending = [], list(BaseSettings.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in packages:
            found.append(cls)
    return found


def known_variables() -> set[str]:
    """Every `HUB_*` environment variable the hub reads."""
    classes = _settings_classes()
    assert len(classes) >= 6, f"found only these settings classes: {classes}"
    known = set(DIRECT_VARIABLES) | cli_variables(ROOT)
    for settings in classes:
        prefix = str(settings.model_config.get("env_prefix", ""))
        known.update(f"{prefix}{field}".upper() for field in settings.model_fields)
    return known


KNOWN_VARIABLES = known_variables()


# --- shell ----------------------------------------------------------------------------------


def _logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """(line in the doc, command text): `\\` continuations and open quotes joined, prompts and
    console output dropped; for YAML, only the lines that run `hub`."""
    pending, first = "", 0
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if block.language == "yaml":
            found = _YAML_HUB_LINE.match(line)
            if found:
                yield number, found["command"]
            continue
        if not pending:
            if block.language == "console" and not line.startswith("$ "):
                continue  # output
            line = line.removeprefix("$ ")
            first = number
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        try:
            _words(pending)
        except ValueError:  # a quote still open: the command goes on on the next line
            pending += "\n"
            continue
        yield first, pending
        pending = ""
    if pending:
        yield first, pending  # an unclosed quote: _words says so


def _words(text: str) -> list[str]:
    lexer = shlex.shlex(_PLACEHOLDER.sub(r"\1", text), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _simple_commands(words: list[str]) -> Iterator[list[str]]:
    """Split at `&&`, `||`, `|`, `;`, `&` and `$(...)`; drop redirections and their targets."""
    current: list[str] = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word and set(word) <= set("();<>|&"):
            if "<" in word or ">" in word:
                skip_next = True
                if current and current[-1].isdigit():
                    current.pop()  # the descriptor of `2>`
            else:
                yield current
                current = []
        else:
            current.append(word)
    yield current


def hub_invocations(block: Block) -> Iterator[tuple[int, list[str]]]:
    """(line, arguments after `hub`) of each command in the block that runs `hub`."""
    for number, text in _logical_lines(block):
        try:
            words = _words(text)
        except ValueError as exc:  # an unclosed quote
            raise AssertionError(f"{block.doc}:{number}: {exc}") from exc
        for command in _simple_commands(words):
            while command and (_ASSIGNMENT.match(command[0]) or command[0] in _WRAPPERS):
                command = command[1:]
            if command and Path(command[0]).name == "hub":
                yield number, command[1:]


# --- the tests ------------------------------------------------------------------------------


def test_the_docs_have_snippets_of_each_kind_to_check() -> None:
    invocations = [found for block in COMMANDS for found in hub_invocations(block)]
    assert len(PYTHON) >= 3
    assert any(block.marker is None for block in PYTHON), "no Python snippet actually runs"
    assert len(invocations) >= 30


def test_every_snippet_marker_is_known_and_sits_right_before_a_fence() -> None:
    problems = []
    placed = {(block.doc, block.line - 1) for block in BLOCKS if block.marker}
    for path in DOCS:
        doc = path.relative_to(REPO).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for marker in _MARKER.finditer(_CODE_SPAN.sub("", line)):
                if marker["name"] not in MARKERS:
                    problems.append(f"{doc}:{number}: unknown marker {marker['name']!r}")
                elif (doc, number) not in placed:
                    problems.append(f"{doc}:{number}: not on the line before a fence")
    marked_elsewhere = [str(b) for b in BLOCKS if b.marker and b not in PYTHON]
    assert problems == []
    assert marked_elsewhere == [], "only Python blocks take a snippet marker"


@pytest.mark.parametrize("block", [pytest.param(b, id=str(b)) for b in PYTHON])
def test_python_snippet_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Padded so that a traceback names the doc's own line numbers.
    source = "\n" * block.line + block.text
    if block.marker == NEEDS_SERVER:
        tree = ast.parse(source, filename=block.doc)
        tree.body = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        code = compile(tree, block.doc, "exec")
    else:
        code = compile(source, block.doc, "exec")
    monkeypatch.chdir(tmp_path)
    exec(code, {"__name__": "__snippet__"})


@pytest.mark.parametrize("block", [pytest.param(b, id=str(b)) for b in COMMANDS])
def test_shell_snippet_names_real_commands_options_and_variables(block: Block) -> None:
    problems = [
        f"{block.doc}:{number}: {problem}"
        for number, words in hub_invocations(block)
        for problem in check_hub_command(words)
    ]
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        problems += [
            f"{block.doc}:{number}: {name} is not an environment variable the hub reads"
            for name in _VARIABLE.findall(line)
            if name not in KNOWN_VARIABLES
        ]
    assert problems == []


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("hub kafka begin", "`hub kafka` has no command 'begin'"),
        ("hub publish feed file.jsonl --batch 5", "`hub publish` has no option --batch"),
        ("hub team create a b", "`hub team create` takes NAME, got 2 argument(s)"),
        ("hub load replay", "`hub load replay` takes TOPIC, got 0 argument(s)"),
        ("hub schema", "`hub schema` is a group"),
    ],
)
def test_the_checker_refuses_what_the_cli_would_refuse(command: str, problem: str) -> None:
    block = Block(doc="doc.md", line=1, language="sh", marker=None, text=f"X=1 {command}\n")
    ((_, words),) = hub_invocations(block)
    assert any(found.startswith(problem) for found in check_hub_command(words))


def test_the_checker_accepts_placeholders_flags_and_commands_inside_pipelines() -> None:
    text = (
        "KEY=$(.venv/bin/hub key create --team <team> | tail -n 1) && hub schema check \\\n"
        "  --against=origin/main --format junit schemas/ a.avsc 2>/dev/null\n"
        "hub up --no-demo --analyst; hub sql 'SELECT 1' --help\n"
    )
    block = Block(doc="doc.md", line=1, language="sh", marker=None, text=text)
    invocations = list(hub_invocations(block))
    assert [words[:2] for _, words in invocations] == [
        ["key", "create"], ["schema", "check"], ["up", "--no-demo"], ["sql", "SELECT 1"]
    ]  # fmt: skip
    assert [check_hub_command(words) for _, words in invocations] == [[], [], [], []]
