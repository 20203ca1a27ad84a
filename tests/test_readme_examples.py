"""The README's examples are checked for real, so they stay true (issue 18).

Every fenced block of README.md is one test, named after its language and the README line of its
opening fence (``yaml-L115``):

- ``yaml``: validated by the loader of each section it has (``metastore:`` by
  :func:`hivemesh.config.load_config`, ``proxy:``/``primary:``/``federated:`` by
  :func:`hivemesh.federation.config.load_federation_config`, ``zones:``/``replication:`` by
  :func:`hivemesh.replication.config.load_replication_config`, ``zones:``/``live:`` by
  :func:`hivemesh.live.config.load_live_config`) from a file; a fragment (a lone
  member, a list of policies) is first wrapped into the smallest whole configuration of its kind.
- ``bash``/``sh``/``console``: every ``hivemesh`` command line parses with the real click command
  tree (subcommands exist, every option is one of that command's, no stray arguments); every
  ``make`` target exists in the Makefile; repository paths named exist; ``python`` scripts under
  ``bench/`` take the options given.
- ``python``: compiles; its ``hivemesh`` imports run; every ``hivemesh.x.y`` name and every call
  of an imported name resolves and takes the arguments given (nothing else runs: no Spark, no
  servers).
- ``sql``: each ``hivemesh.remote.*`` definition is parsed by the proxy's own remote parser.

Blocks no checker understands must be listed in :data:`UNCHECKED_BLOCKS` with the reason, so a
new one fails here until someone decides. Inline code is checked too: ``hivemesh ...`` command
spans as above, ``hivemesh.x.y`` names resolve, and relative links ``[text](path)`` point to an
existing file (``#anchor`` links to a heading).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

UNCHECKED_BLOCKS: dict[str, str] = {
    # first non-blank line of the block (stripped) -> why no checker applies; keep this small
}
"""Fenced blocks deliberately left unchecked, by their first non-blank line, with the reason."""

NON_PYTHON_NAMES = {
    "hivemesh.remote.*": "table and database properties of a remote (checked in the sql blocks)",
    "hivemesh.audit": "the audit logger's name",
    "hivemesh.source": "a key of a Delta replica's commitInfo",
    "hivemesh.writeId": "a key of a Delta replica's commitInfo",
    "hivemesh.eventId": "a key of a Delta replica's commitInfo",
    "hivemesh.validWriteIds": "a key of a Delta replica's commitInfo",
}
"""Inline ``hivemesh.*`` names that are not Python names (their second part is no hivemesh module)."""

REPO_DIRS = ("bench/", "deploy/", "docs/", "src/", "tests/")
"""A shell word starting with one of these names a file of this repository: it must exist."""


# ------------------------------------------------------------------------------------------ extraction
@dataclass(frozen=True)
class Block:
    """One fenced block: its language, the README line of its opening fence, its text."""

    lang: str
    line: int
    text: str

    @property
    def key(self) -> str:
        """Its first non-blank line, stripped (how :data:`UNCHECKED_BLOCKS` names it)."""
        return next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.lang} block)"


_FENCE = re.compile(r"^\s*```\s*([\w+-]*)\s*$")


def fenced_blocks(text: str) -> list[Block]:
    """The fenced (```) blocks of a markdown text, in order."""
    blocks: list[Block] = []
    lang, start, body = None, 0, []  # lang is None outside a block
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if lang is None:
            if m:
                lang, start, body = m.group(1).lower(), n, []
        elif line.strip() == "```":
            blocks.append(Block(lang, start, "\n".join(body) + "\n"))
            lang = None
        else:
            body.append(line)
    assert lang is None, f"README.md:{start}: fenced block never closed"
    return blocks


def prose(text: str) -> str:
    """The text with fenced blocks blanked out (line numbers kept)."""
    out, inside = [], False
    for line in text.splitlines():
        if _FENCE.match(line) or (inside and line.strip() == "```"):
            inside = not inside
            out.append("")
        else:
            out.append("" if inside else line)
    return "\n".join(out)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def blocks_of(*langs: str) -> list[Any]:
    """pytest params of the README's blocks in ``langs``, each with id ``<lang>-L<line>``; blocks of
    :data:`UNCHECKED_BLOCKS` are left out (a skip would fail CI, where skips are errors)."""
    return [
        pytest.param(b, id=f"{b.lang}-L{b.line}")
        for b in fenced_blocks(readme_text())
        if b.lang in langs and b.key not in UNCHECKED_BLOCKS
    ]


# ------------------------------------------------------------------------------------------------- yaml
METASTORE_KEYS = {"metastore"}
PROXY_KEYS = {"proxy", "primary", "federated"}
REPLICATION_KEYS = {"zones", "replication"}
LIVE_KEYS = {"live"}
MEMBER_KEYS = {"uris", "embedded", "glue_config"}
POLICY_KEYS = {"source", "target", "databases"}
MIN_PRIMARY = {"name": "readme_primary", "uris": ["thrift://primary.example:9083"]}


class Unclassified(Exception):
    """A YAML block that is neither a configuration nor a fragment of one that the checker knows."""


def _is_member(x: Any) -> bool:
    return isinstance(x, dict) and "name" in x and bool(MEMBER_KEYS & x.keys())


def _is_policy(x: Any) -> bool:
    return isinstance(x, dict) and "name" in x and POLICY_KEYS <= x.keys()


def whole_config(data: Any) -> dict[str, Any]:
    """``data`` (a parsed YAML block) as a whole mesh.yaml: as it is when its top-level keys are
    sections, else the fragment (a member, a list of members, a policy, a list of policies) in the
    smallest configuration of its kind. Raises Unclassified."""
    if (
        isinstance(data, dict)
        and data
        and data.keys() <= METASTORE_KEYS | PROXY_KEYS | REPLICATION_KEYS | LIVE_KEYS
    ):
        return data
    items = data if isinstance(data, list) else [data]
    if items and all(_is_member(m) for m in items):
        return {"primary": MIN_PRIMARY, "federated": items}
    if items and all(_is_policy(p) for p in items):
        zones = sorted({p[side] for p in items for side in ("source", "target")})
        return {
            "zones": {
                z: {"metastore": f"thrift://{z}.example:9083", "warehouse": f"/data/{z}"} for z in zones
            },
            "replication": {"policies": items},
        }
    raise Unclassified(
        f"top-level {sorted(data) if isinstance(data, dict) else type(data).__name__} is no mesh.yaml "
        "section and no known fragment (member, policy)"
    )


def validate_yaml(text: str, tmp: Path) -> list[str]:
    """Validate a YAML block with the real loaders; returns which sections were checked.
    Raises ConfigError (invalid), Unclassified, or yaml.YAMLError."""
    from hivemesh.config import load_config
    from hivemesh.federation.config import load_federation_config
    from hivemesh.live.config import load_live_config
    from hivemesh.replication.config import load_replication_config

    cfg = whole_config(yaml.safe_load(text))
    checked = []
    if cfg.keys() & METASTORE_KEYS:
        path = tmp / "metastore.yaml"
        path.write_text(yaml.safe_dump({"metastore": cfg["metastore"]}), encoding="utf-8")
        load_config(path)
        checked.append("metastore")
    if cfg.keys() & PROXY_KEYS:
        section = {k: v for k, v in cfg.items() if k in PROXY_KEYS}
        section.setdefault("primary", MIN_PRIMARY)  # a lone proxy: block
        path = tmp / "proxy.yaml"
        path.write_text(yaml.safe_dump(section), encoding="utf-8")
        load_federation_config(path)
        checked.append("proxy")
    if cfg.keys() & LIVE_KEYS:
        path = tmp / "live.yaml"
        path.write_text(
            yaml.safe_dump({k: v for k, v in cfg.items() if k in REPLICATION_KEYS | LIVE_KEYS}),
            encoding="utf-8",
        )
        load_live_config(path)
        checked.append("live")
    if "replication" in cfg or (cfg.keys() & REPLICATION_KEYS and "live" not in cfg):
        path = tmp / "replication.yaml"
        path.write_text(
            yaml.safe_dump({k: v for k, v in cfg.items() if k in REPLICATION_KEYS}), encoding="utf-8"
        )
        load_replication_config(path)
        checked.append("replication")
    return checked


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HIVEMESH_* setting of the environment running the tests leaks into the loaders."""
    for name in list(os.environ):
        if name.startswith("HIVEMESH_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("block", blocks_of("yaml", "yml"))
def test_yaml_block_is_a_valid_configuration(block: Block, tmp_path: Path, clean_env: None) -> None:
    try:
        checked = validate_yaml(block.text, tmp_path)
    except Unclassified as e:
        pytest.fail(f"{block}: {e}; make it a whole config or list it in UNCHECKED_BLOCKS with the reason")
    except Exception as e:
        pytest.fail(f"{block} does not validate: {e}")
    assert checked, block


# ------------------------------------------------------------------------------------------------ shell
def shell_commands(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line offset in the block, argv) of each simple command: continuation lines joined,
    comments dropped, ``&&``/``||``/``|``/``;`` split, leading ``VAR=value`` and ``$ `` dropped."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, logical = i, lines[i]
        while logical.endswith("\\") and i + 1 < len(lines):
            i += 1
            logical = logical[:-1] + " " + lines[i]
        i += 1
        logical = re.sub(r"^\s*\$\s", "", logical)  # a console prompt
        lexer = shlex.shlex(logical, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        argv: list[str] = []
        for tok in [*lexer, ";"]:
            if tok and set(tok) <= set(";&|"):
                while argv and re.fullmatch(r"[A-Za-z_]\w*=.*", argv[0]):
                    argv.pop(0)
                if argv:
                    yield start, argv
                argv = []
            else:
                argv.append(tok)


def _unbracket(words: list[str]) -> list[str]:
    """``[--policy NAME]`` (usage notation for optional parts) read as ``--policy NAME``."""
    out = []
    for w in words:
        w = w[1:] if w.startswith("[") else w
        w = w[:-1] if w.endswith("]") and "[" not in w else w
        if w:
            out.append(w)
    return out


def check_hivemesh(args: list[str]) -> list[str]:
    """Problems of a ``hivemesh`` command line (``args`` without the program name), as parsed by
    the real click commands: every subcommand exists, every option is one of its command's, option
    values are there and no argument is left over. Values themselves are not checked
    (``--db URL`` is fine)."""
    from hivemesh.cli import main

    cmd: click.Command = main
    parent: click.Context | None = None
    path, rest = ["hivemesh"], _unbracket(args)
    while True:
        # the command's own parser only: no type conversion, no callbacks, nothing runs (a
        # resilient_parsing context would also swallow unknown options)
        ctx = click.Context(cmd, info_name=path[-1], parent=parent, **cmd.context_settings)
        try:
            _, rest, _ = cmd.make_parser(ctx).parse_args(list(rest))
        except click.UsageError as e:
            return [f"`{' '.join(path)}`: {e.format_message()}"]
        if not isinstance(cmd, click.Group):
            return [f"`{' '.join(path)}`: unexpected arguments {rest}"] if rest else []
        if not rest:
            return []
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            known = ", ".join(cmd.list_commands(ctx))
            return [f"`{' '.join(path)}` has no subcommand {rest[0]!r} (it has: {known})"]
        path.append(rest[0])
        cmd, parent, rest = sub, ctx, rest[1:]


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)} - {".PHONY"}


@functools.cache
def script_options(script: str) -> frozenset[str]:
    """The ``--options`` a script's ``--help`` lists (benchmarks: argparse, no work done)."""
    out = subprocess.run(
        [sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return frozenset(re.findall(r"(?<![\w-])--[\w-]+", out.stdout))


def check_command(argv: list[str]) -> list[str]:
    """Problems of one shell command of the README (commands not of this project pass)."""
    problems = [
        f"{w} does not exist in the repository"
        for w in argv
        if w.startswith(REPO_DIRS) and not (ROOT / w).exists()
    ]
    prog = os.path.basename(argv[0])
    if prog == "hivemesh":
        problems += check_hivemesh(argv[1:])
    elif prog == "make":
        targets = make_targets()
        problems += [
            f"make has no target {t!r} (Makefile has: {', '.join(sorted(targets))})"
            for t in argv[1:]
            if not t.startswith("-") and "=" not in t and t not in targets
        ]
    elif re.fullmatch(r"python(3(\.\d+)?)?", prog) and len(argv) > 1 and argv[1].endswith(".py"):
        script = ROOT / argv[1]
        if not script.exists():
            problems.append(f"{argv[1]} does not exist")
        elif argv[1].startswith("bench/"):  # a benchmark script takes the options given
            options = script_options(argv[1])
            problems += [
                f"{argv[1]} takes no option {flag} (its --help lists {', '.join(sorted(options))})"
                for flag in (w.split("=", 1)[0] for w in argv[2:] if w.startswith("--"))
                if flag not in options
            ]
    return problems


@pytest.mark.parametrize("block", blocks_of("bash", "sh", "shell", "console"))
def test_shell_block_commands_exist(block: Block) -> None:
    problems = [
        f"README.md:{block.line + 1 + offset}: `{shlex.join(argv)}`: {p}"
        for offset, argv in shell_commands(block.text)
        for p in check_command(argv)
    ]
    assert not problems, "\n".join(problems)


_INLINE_COMMAND = re.compile(r"`((?:\.venv/bin/)?(?:hivemesh|python) [^`]+)`")

NOT_COMMANDS = {
    "hivemesh metastore listening on HOST:PORT": "the line the metastore prints when it is ready",
}
"""Inline code starting like a command that is no command, with the reason."""


def inline_commands() -> list[Any]:
    text = prose(readme_text())
    return [
        pytest.param(
            line_of(text, m.start()), " ".join(m.group(1).split()), id=f"L{line_of(text, m.start())}"
        )
        for m in _INLINE_COMMAND.finditer(text)
        if " ".join(m.group(1).split()) not in NOT_COMMANDS
    ]


@pytest.mark.parametrize(("line", "command"), inline_commands())
def test_inline_hivemesh_command_exists(line: int, command: str) -> None:
    """`hivemesh proxy --config` and the like in the prose: the same check as the shell blocks."""
    problems = [
        p
        for _, argv in shell_commands(command)
        for p in check_command(argv)
        if "requires an argument" not in p  # prose names an option without its value: fine
    ]
    assert not problems, f"README.md:{line}: `{command}`: " + "\n".join(problems)


# ----------------------------------------------------------------------------------------------- python
def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def resolve(namespace: dict[str, Any], parts: list[str]) -> Any:
    """The object ``parts`` names in ``namespace``, importing submodules of packages on the way
    (``hivemesh.acid.writer`` with only ``import hivemesh``). Raises AttributeError."""
    obj = namespace[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        if not hasattr(obj, part) and inspect.ismodule(obj):
            try:
                importlib.import_module(f"{obj.__name__}.{part}")
            except ModuleNotFoundError:
                pass
        if not hasattr(obj, part):
            raise AttributeError(f"{'.'.join(parts[:i])} has no attribute {part!r}")
        obj = getattr(obj, part)
    return obj


def check_python(text: str, filename: str, first_line: int = 1) -> list[str]:
    """Problems of a Python example: it compiles, its imports of hivemesh run (others must be
    installed), every name rooted in an import resolves and every call of one binds to its
    signature. Nothing but imports is executed. Problems name the line (``text`` starting at
    line ``first_line`` of ``filename``)."""
    tree = ast.parse(compile(text, filename, "exec", ast.PyCF_ONLY_AST), filename)
    ast.increment_lineno(tree, first_line - 1)
    namespace: dict[str, Any] = {}
    problems: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        if (module or "").split(".")[0] == "hivemesh":
            try:
                exec(compile(ast.Module([node], []), filename, "exec"), namespace)
            except ImportError as e:
                problems.append(f"{filename}:{node.lineno}: {ast.unparse(node)}: {e}")
        elif module and importlib.util.find_spec(module.split(".")[0]) is None:
            problems.append(f"{filename}:{node.lineno}: {module} is not installed")
    namespace.pop("__builtins__", None)
    seen: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            target = node.func
        elif isinstance(node, ast.Attribute) and id(node) not in seen:
            target = node
        else:
            continue
        parts = _dotted(target)
        if parts is None or parts[0] not in namespace:
            continue
        sub: ast.AST = target
        while isinstance(sub, ast.Attribute):  # the chain is checked once, as a whole
            seen.add(id(sub))
            sub = sub.value
        try:
            obj = resolve(namespace, parts)
        except AttributeError as e:
            problems.append(f"{filename}:{target.lineno}: {e}")
            continue
        if isinstance(node, ast.Call) and callable(obj):
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords
            ):
                continue
            try:
                inspect.signature(obj).bind(*node.args, **{k.arg: k.value for k in node.keywords if k.arg})
            except TypeError as e:
                problems.append(f"{filename}:{node.lineno}: {ast.unparse(node.func)}(...): {e}")
            except ValueError:  # no signature (a builtin)
                pass
    return problems


@pytest.mark.parametrize("block", blocks_of("python", "py", "pycon"))
def test_python_block_names_resolve(block: Block) -> None:
    try:
        problems = check_python(block.text, "README.md", block.line + 1)
    except SyntaxError as e:
        pytest.fail(f"README.md:{block.line + (e.lineno or 0)}: does not compile: {e.msg}")
    assert not problems, "\n".join(problems)


_INLINE_NAME = re.compile(r"(?<![\w.'\"])hivemesh(?:\.(?:\w+|\*))+")


def _parenthesized(text: str, start: int) -> str | None:
    """The balanced ``(...)`` at ``text[start]``, or None."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1] if i > start else None
    return None


def inline_names() -> list[Any]:
    """(name, its parenthesized arguments or None, README line) of each inline ``hivemesh.x``."""
    text = prose(readme_text())
    found: dict[tuple[str, str | None], int] = {}
    for span in re.finditer(r"`[^`]+`", text):
        code = span.group(0)[1:-1]
        for m in _INLINE_NAME.finditer(code):
            found.setdefault((m.group(0), _parenthesized(code, m.end())), line_of(text, span.start()))
    return [
        pytest.param(name, args, line, id=f"L{line}-{name}{'(...)' if args else ''}")
        for (name, args), line in found.items()
    ]


def _bare(sig: inspect.Signature) -> inspect.Signature:
    return sig.replace(
        parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )


def check_inline_call(obj: Any, args: str) -> str | None:
    """A problem of ``name(args)`` written in the prose: with ``*args`` or ``**kwargs`` it documents
    the signature, which must be the real one (annotations aside); else it is a call, whose
    arguments must bind."""
    try:
        if re.search(r"(^|[(,])\s*\*{1,2}\w", args):
            namespace: dict[str, Any] = {}
            exec(f"def f{args}: pass", namespace)
            doc, real = inspect.signature(namespace["f"]), _bare(inspect.signature(obj))
            return None if str(doc) == str(real) else f"documented as {doc}, but it is {real}"
        call = ast.parse(f"f{args}", mode="eval").body
        assert isinstance(call, ast.Call)
        inspect.signature(obj).bind(*call.args, **{k.arg: k.value for k in call.keywords if k.arg})
    except (SyntaxError, TypeError) as e:
        return f"arguments {args}: {e}"
    return None


@pytest.mark.parametrize(("name", "args", "line"), inline_names())
def test_inline_hivemesh_name_resolves(name: str, args: str | None, line: int) -> None:
    """`hivemesh.acid.writer.AcidWriter(client, db, table)` and the like in the prose name real
    objects, taking the arguments shown."""
    import hivemesh

    parts = name.split(".")
    try:
        importlib.import_module(f"hivemesh.{parts[1]}")
    except ModuleNotFoundError:
        assert name in NON_PYTHON_NAMES, (
            f"README.md:{line}: `{name}` is no hivemesh module; if it is not a Python name, add it to NON_PYTHON_NAMES"
        )
        return
    try:
        obj = resolve({"hivemesh": hivemesh}, parts)
    except AttributeError as e:
        pytest.fail(f"README.md:{line}: `{name}`: {e}")
    if args is not None:
        problem = check_inline_call(obj, args)
        assert problem is None, f"README.md:{line}: `{name}{args}`: {problem}"


# -------------------------------------------------------------------------------------------------- sql
_REMOTE_DDL = re.compile(
    r"CREATE\s+(DATABASE|TABLE)\s+([\w.]+).*?(?:DBPROPERTIES|TBLPROPERTIES)\s*\((.*?)\)\s*;", re.S | re.I
)


def check_sql(text: str, first_line: int = 1) -> tuple[int, list[str]]:
    """(statements checked, problems) of a SQL example (starting at README line ``first_line``):
    each CREATE with ``hivemesh.remote.*`` properties is parsed by the proxy's remote parser."""
    from hivemesh.federation.remotes.spec import RemoteError, database_remote, table_remote

    text = re.sub(r"--[^\n]*", "", text)  # line numbers kept
    checked, problems = 0, []
    for m in _REMOTE_DDL.finditer(text):
        props = dict(re.findall(r"'([^']*)'\s*=\s*'([^']*)'", m.group(3)))
        if not any(k.startswith("hivemesh.remote.") for k in props):
            continue
        checked += 1
        try:
            if m.group(1).upper() == "DATABASE":
                spec = database_remote(m.group(2), props)
            else:
                db, _, table = m.group(2).rpartition(".")
                spec = table_remote(db or "default", table, props)
            assert spec is not None
        except RemoteError as e:
            line = first_line + text.count("\n", 0, m.start())
            problems.append(f"README.md:{line}: {' '.join(m.group(0).split('(')[0].split())}: {e}")
    return checked, problems


@pytest.mark.parametrize("block", blocks_of("sql"))
def test_sql_block_remote_definitions_parse(block: Block) -> None:
    checked, problems = check_sql(block.text, block.line + 1)
    assert not problems, "\n".join(problems)
    assert checked, f"{block}: no remote definition to check; list it in UNCHECKED_BLOCKS with the reason"


# ---------------------------------------------------------------------------------------- every block
CHECKED_LANGS = {"yaml", "yml", "bash", "sh", "shell", "console", "python", "py", "pycon", "sql"}


def test_every_block_has_a_checker() -> None:
    """A block in a language nothing checks (or with none) must be listed in UNCHECKED_BLOCKS."""
    blocks = fenced_blocks(readme_text())
    unchecked = [
        f"{b}: {b.key!r}" for b in blocks if b.lang not in CHECKED_LANGS and b.key not in UNCHECKED_BLOCKS
    ]
    assert not unchecked, (
        "blocks no test checks (give them a language or list them in UNCHECKED_BLOCKS):\n"
        + "\n".join(unchecked)
    )
    stale = set(UNCHECKED_BLOCKS) - {b.key for b in blocks}
    assert not stale, f"UNCHECKED_BLOCKS names blocks the README no longer has: {sorted(stale)}"


# ------------------------------------------------------------------------------------------------ links
def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def readme_links() -> list[Any]:
    text = prose(readme_text())
    return [
        pytest.param(m.group(2), line_of(text, m.start()), id=f"L{line_of(text, m.start())}-{m.group(2)}")
        for m in re.finditer(r"\[([^\]]*)\]\(([^)\s]+)\)", text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", m.group(2))  # http:, https:, mailto:
    ]


@pytest.mark.parametrize(("target", "line"), readme_links())
def test_relative_link_exists(target: str, line: int) -> None:
    path, _, anchor = target.partition("#")
    if path:
        assert (ROOT / path).exists(), f"README.md:{line}: link to {path}, which does not exist"
    elif anchor:
        anchors = {_slug(h) for h in re.findall(r"^#+\s+(.*)$", prose(readme_text()), re.M)}
        assert anchor in anchors, f"README.md:{line}: link to #{anchor}, no such heading"


# ------------------------------------------------------------------------------------ the checks can fail
def test_checkers_reject_wrong_examples(tmp_path: Path, clean_env: None) -> None:
    """Each checker above fails on a wrong example (else the tests above would prove nothing)."""
    from hivemesh.config import ConfigError

    assert check_hivemesh(["metastore", "--db", "URL", "--port", "PORT"]) == []
    assert check_hivemesh(["replicate", "run", "[--policy", "NAME]", "[--once]"]) == []
    assert check_hivemesh(["metastore", "schema", "status", "--db", "URL", "--format", "json"]) == []
    assert "--no-such-flag" in " ".join(check_hivemesh(["metastore", "--no-such-flag"]))
    assert "no subcommand 'serve'" in " ".join(check_hivemesh(["serve"]))
    assert "no subcommand 'nope'" in " ".join(check_hivemesh(["metastore", "schema", "nope"]))
    assert check_hivemesh(["replicate", "run", "--policy"])  # the option's value is missing
    assert check_hivemesh(["jars", "list", "extra"])  # a stray argument
    assert check_hivemesh(["remote", "list", "--no-check"])  # an option of a sibling command
    block = "hivemesh metastore \\\n    --no-such-flag 1   # comment\nmake no-such-target\n"
    assert [len(check_command(argv)) for _, argv in shell_commands(block)] == [1, 1]
    assert check_command(["install", "deploy/no-such.service", "/etc/"])
    assert check_command(["python", "bench/metastore.py", "--no-such-option"])

    with pytest.raises(ConfigError, match="prot"):
        validate_yaml("metastore:\n  prot: 9083\n", tmp_path)
    with pytest.raises(ConfigError, match="uris"):
        validate_yaml("- name: eu\n  uris: ['http://h:1']\n  access_control: read_only\n", tmp_path)
    with pytest.raises(ConfigError):
        validate_yaml("- {name: p, source: a, target: a, databases: [x]}\n", tmp_path)
    with pytest.raises(Unclassified):
        validate_yaml("spark:\n  master: local\n", tmp_path)
    assert validate_yaml("- {name: p, source: a, target: b, databases: [x]}\n", tmp_path) == ["replication"]

    assert check_python("from hivemesh.tls import client_context\n", "t") == []
    assert check_python("from hivemesh.tls import no_such_name\n", "t")
    assert check_python("import hivemesh.tls\nhivemesh.tls.no_such(1)\n", "t")
    assert check_python("from hivemesh.tls import client_context\nclient_context(no_such_kw=1)\n", "t")
    with pytest.raises(SyntaxError):
        check_python("def (:\n", "t")

    assert check_sql("CREATE DATABASE x WITH DBPROPERTIES ('hivemesh.remote.urls' = 'thrift://h:1');")[1]
    assert [b.line for b in fenced_blocks("a\n```yaml\nx: 1\n```\n\n```\nplain\n```\n")] == [2, 6]


def test_readme_numbers_agree_with_the_code() -> None:
    """Facts the README states that live in code: the PostgreSQL pool of a metastore process, and
    each JVM bundle's size and Java range as ``hivemesh jars list`` prints them."""
    from click.testing import CliRunner

    from hivemesh.cli import main
    from hivemesh.jvm.artifacts import BUNDLES
    from hivemesh.metastore.store import PG_OVERFLOW, Store

    text = " ".join(README.read_text(encoding="utf-8").split())
    pool = inspect.signature(Store.__init__).parameters["pool_size"].default
    assert f"Each process keeps a pool of {pool} connections and opens up to {PG_OVERFLOW} more" in text
    listed = CliRunner().invoke(main, ["jars", "list"]).output.splitlines()
    for bundle in BUNDLES.values():
        (row,) = [
            line
            for line in README.read_text(encoding="utf-8").splitlines()
            if line.startswith(f"| `{bundle.name}` |")
        ]
        assert row.endswith(f"| ~{bundle.approx_mb} MB | {bundle.java_range} |"), row
        (line,) = [line for line in listed if line.startswith(f"{bundle.name}\t")]
        assert line.split("\t")[1:3] == [f"~{bundle.approx_mb} MB", f"Java {bundle.java_range}"]
