"""The configuration reference (``docs/configuration.md``), rendered from the pydantic models and
the click commands so that it cannot drift from the code.

Every key of every section of mesh.yaml is listed with its type, default, description, the
command-line option that sets it (read from the options of ``hivemesh metastore`` and
``hivemesh proxy``: each option sets the key of its parameter name) and its environment variable
(``HIVEMESH_<SECTION>_<OPTION>``, :func:`hivemesh.config.env_overrides`). Nested models get their
own tables, with dotted keys (``federated[].ssh_tunnel.route``, ``zones.<name>.s3.region``).

``python -m hivemesh.config_reference`` prints the reference, ``--output FILE`` writes it,
``--check FILE`` exits 1 naming the differences when FILE is stale (``make docs`` regenerates it).

This module sits above every layer of the import contract (it reads the command line of
:mod:`hivemesh.cli`); nothing in hivemesh imports it.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import annotated_types
import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from hivemesh.config import MeshConfig, MetastoreConfig, option_name

__all__ = ["DOC_PATH", "REGENERATE", "check", "cli_flags", "env_vars", "main", "render"]

DOC_PATH = Path("docs/configuration.md")
"""Where the reference lives, relative to the repository root."""

REGENERATE = "make docs"
"""The command that regenerates :data:`DOC_PATH` (``python -m hivemesh.config_reference --output
docs/configuration.md``)."""

ENV_SECTIONS = ("metastore", "proxy")
"""Sections read from ``HIVEMESH_<SECTION>_<OPTION>`` variables: ``metastore`` by
:func:`hivemesh.config.load_config`, ``proxy`` by
:func:`hivemesh.federation.config.load_federation_config`. No other section reads the environment."""

COMMANDS = {"metastore": "metastore", "proxy": "proxy"}
"""Section -> the ``hivemesh`` command whose options set its keys. ``hivemesh.cli`` hands each
option to the section under its parameter name (``--txn-timeout`` -> ``txn_timeout_s``); options
whose name is no key of the section (``--config``) set nothing. No ``hivemesh replicate``, ``remote``
or ``quickstart`` option sets a key of mesh.yaml."""


# ---------------------------------------------------------------------------------------------
# Where a key comes from: command-line options and environment variables


def cli_flags(section: str) -> dict[str, str]:
    """Key of ``section`` -> the option of its ``hivemesh`` command that sets it, as the help
    spells it (``--framed/--unframed``; ``(repeatable)`` for options given several times).
    Empty for a section no command option sets."""
    from hivemesh.cli import main as hivemesh  # the top of the import layers: only when rendering

    command_name = COMMANDS.get(section)
    if command_name is None:
        return {}
    command = hivemesh.get_command(click.Context(hivemesh), command_name)
    if command is None:
        return {}
    fields = _section_model(section).model_fields
    out: dict[str, str] = {}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name not in fields:
            continue
        flag = "/".join([", ".join(sorted(param.opts, key=len, reverse=True)), *param.secondary_opts])
        out[param.name] = f"`{flag}`" + (" (repeatable)" if param.multiple else "")
    return out


def env_vars(section: str, key: str) -> list[str]:
    """The environment variables that set ``key`` of ``section``, the option's spelling first
    (``HIVEMESH_METASTORE_TXN_TIMEOUT``, then ``HIVEMESH_METASTORE_TXN_TIMEOUT_S``), as
    :func:`hivemesh.config.env_overrides` reads them. Empty when the section reads no variables."""
    if section not in ENV_SECTIONS:
        return []
    prefix = f"HIVEMESH_{section.upper()}_"
    names = [prefix + option_name(key).replace("-", "_").upper(), prefix + key.upper()]
    return list(dict.fromkeys(names))


def _section_model(section: str) -> type[BaseModel]:
    """The model of a top-level section (``metastore``, ``proxy``, ``primary`` ...)."""
    for root in _roots():
        info = root.model_fields.get(section)
        if info is not None:
            model = _nested(info.annotation)
            if model is not None:
                return model[1]
    raise KeyError(section)


def _roots() -> list[type[BaseModel]]:
    """The models of mesh.yaml's parts, each read by its command: the metastore's, the proxy's,
    replication's, Live Hive's."""
    from hivemesh.federation.config import FederationConfig
    from hivemesh.live.config import LiveFile
    from hivemesh.replication.config import ReplicationFile

    return [MeshConfig, FederationConfig, ReplicationFile, LiveFile]


# ---------------------------------------------------------------------------------------------
# Types, defaults and descriptions as Markdown


def _optional(annotation: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, else ``(annotation, False)``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) < len(typing.get_args(annotation)):
            return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), True  # noqa: UP007
    return annotation, False


def _nested(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """How a field holds a model: ``("", M)`` for ``M`` (or ``M | None``), ``("[]", M)`` for a
    list of ``M``, ``(".<name>", M)`` for a mapping of names to ``M``; None for other types."""
    inner, _ = _optional(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return "", inner
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "[]", args[0]
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return ".<name>", args[1]
    return None


def _type_name(annotation: Any) -> str:
    """A type as a reader of YAML knows it: ``int``, ``list of string``, ``one of a, b``."""
    inner, optional = _optional(annotation)
    text = _plain_type(inner)
    return f"{text} or null" if optional else text


def _plain_type(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "mapping"
    if origin is list:
        return f"list of {_plain_type(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_plain_type(args[0])} to {_plain_type(args[1])}" if args else "mapping"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_plain_type(a) for a in args)
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _constraints(info: FieldInfo) -> str:
    """The bounds pydantic checks (``≥ 0, ≤ 65535``), or empty."""
    out = []
    for m in info.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(m, attr, None)
            if isinstance(m, annotated_types.BaseMetadata) and value is not None:
                out.append(f"{sign} {value}")
        if isinstance(m, annotated_types.MinLen) and m.min_length:
            out.append(f"at least {m.min_length} long")
        pattern = getattr(m, "pattern", None)
        if isinstance(pattern, str):
            out.append(f"matching `{pattern}`")
    return ", ".join(out)


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, BaseModel):
        return "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(info: FieldInfo) -> str:
    """The default as written in YAML, in code style; **required** when there is none."""
    if info.is_required():
        return "**required**"
    value = info.get_default(call_default_factory=True)
    if value is PydanticUndefined:
        return "**required**"
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "all defaults"
    return f"`{_yaml_value(value)}`"


def _first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring, in Markdown (no pointers to the source)."""
    text = " ".join((doc or "").split()).replace("``", "`")
    end = text.find(". ")
    text = text if end < 0 else text[: end + 1]
    return re.sub(r"\s*\([^()]*docstring[^()]*\)", "", text)


def _description(info: FieldInfo) -> str:
    """The field's description; for a field without one, the docstring of its model or enum."""
    if info.description:
        return info.description
    inner, _ = _optional(info.annotation)
    nested = _nested(info.annotation)
    if nested is not None:
        return _first_sentence(nested[1].__doc__)
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return _first_sentence(inner.__doc__)
    return ""


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (``*`` and ``<`` escaped outside code spans)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = parts[i].replace("*", "\\*").replace("<", "&lt;")
    return "`".join(parts) or "—"


def _code(key: str) -> str:
    return f"`{key}`"


# ---------------------------------------------------------------------------------------------
# Tables


@dataclass
class _Table:
    key: str  # dotted key of the model's mapping: "metastore", "federated[]", "zones.<name>.s3"
    model: type[BaseModel]
    rows: list[list[str]] = field(default_factory=list)


def _in_reading_order(model: type[BaseModel]) -> list[tuple[str, Any]]:
    """The fields of ``model``, its own first and those it inherits (the TLS and Kerberos settings
    several sections share) after them: ``host`` and ``port`` lead, as in the README."""
    own = set(model.__annotations__)
    fields = list(model.model_fields.items())
    return [f for f in fields if f[0] in own] + [f for f in fields if f[0] not in own]


def _tables(section: str, key: str, model: type[BaseModel]) -> Iterator[_Table]:
    """The table of ``model`` at ``key``, then the tables of the models nested in it."""
    flags = cli_flags(section) if key == section else {}
    env = key == section
    table = _Table(key, model)
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in _in_reading_order(model):
        dotted = f"{key}.{name}"
        kind = _nested(info.annotation)
        description = _cell(_description(info))
        if kind is not None:
            sub = f"{dotted}{kind[0]}"
            nested.append((sub, kind[1]))
            lead = description if description.endswith((".", ")")) else f"{description}."
            description = f"{lead} Keys: {_code(sub + '.*')} below."
        type_text = _type_name(info.annotation)
        bounds = _constraints(info)
        if bounds:
            type_text += f", {bounds}"
        names = env_vars(section, name) if env else []
        env_text = " or ".join(_code(n) for n in names) if names else "—"
        if names and _comma_separated(model, name, info):
            env_text += " (comma-separated)"
        table.rows.append(
            [
                _code(dotted),
                _cell(type_text),
                _default(info),
                flags.get(name, "—"),
                env_text,
                description,
            ]
        )
    yield table
    for sub, sub_model in nested:
        yield from _tables(section, sub, sub_model)


def _comma_separated(model: type[BaseModel], name: str, info: FieldInfo) -> bool:
    """Whether a list field accepts one comma-separated string (as an environment variable is)."""
    inner, _ = _optional(info.annotation)
    if typing.get_origin(inner) is not list:
        return False
    try:
        value = model.__pydantic_validator__.validate_assignment(model.model_construct(), name, "a,b")
    except Exception:  # noqa: BLE001 - any refusal means: not comma-separated
        return False
    return getattr(value, name, None) == ["a", "b"]


def _markdown(table: _Table) -> list[str]:
    lines = [
        "| key | type | default | option | environment variable | description |",
        "|---|---|---|---|---|---|",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in table.rows)
    return lines


# ---------------------------------------------------------------------------------------------
# The document


def _facts() -> dict[str, Any]:
    """Behaviour of the defaults, found by validating minimal configurations (not written by hand)."""
    from pydantic import ValidationError

    from hivemesh.federation.config import FEDERATED_ACCESS, FederationConfig

    primary = {"name": "main", "uris": ["thrift://hms:9083"]}
    member = {"name": "sales", "uris": ["thrift://hms2:9083"]}
    minimal = FederationConfig.model_validate({"primary": primary, "federated": [member]})

    def refused(body: dict[str, Any]) -> bool:
        """Whether the federation config ``body`` fails validation."""
        try:
            FederationConfig.model_validate(body)
        except ValidationError:
            return True
        return False

    return {
        "primary_prefix_refused": refused({"primary": {**primary, "database_prefix": "main_"}}),
        "federated_read_only_uris_refused": refused(
            {"primary": primary, "federated": [{**member, "read_only_uris": ["thrift://hms3:9083"]}]}
        ),
        "primary_access": minimal.primary.access_control.value,
        "proxy_host": minimal.proxy.host,
        "proxy_port": minimal.proxy.port,
        "resolution": minimal.proxy.database_resolution.value,
        "federated_prefix": minimal.federated[0].database_prefix,
        "federated_access": [a.value for a in FEDERATED_ACCESS],
        "metastore_port": MetastoreConfig.model_validate({}).port,
    }


def _intro(section: str, facts: dict[str, Any]) -> list[str]:
    """What a section is and which command reads it (prose checked against the models)."""
    if section == "metastore":
        return [
            "Read by `hivemesh metastore`. Each key can also be given as the option listed, or as the "
            "environment variable `HIVEMESH_METASTORE_<OPTION>` (the option's name, or the key's "
            "spelling); an unknown `HIVEMESH_METASTORE_*` variable is an error. Options win over "
            "variables, variables over the file, the file over the defaults.",
        ]
    if section == "proxy":
        same = (
            " That is also `hivemesh metastore`'s default port: give one of them another port "
            "when both run on one host."
            if facts["proxy_port"] == facts["metastore_port"]
            else ""
        )
        return [
            "Read by `hivemesh proxy` (which needs `--config`). Keys of this section only can also be "
            "given as the option listed, or as the environment variable `HIVEMESH_PROXY_<OPTION>`; "
            "an unknown `HIVEMESH_PROXY_*` variable is an error. Options win over variables, "
            "variables over the file, the file over the defaults.",
            "",
            f"By default the proxy listens on `{facts['proxy_host']}:{facts['proxy_port']}`.{same}",
        ]
    if section == "primary":
        access = facts["primary_access"]
        lines = [
            "The proxy's primary metastore: **required** by `hivemesh proxy`. Databases no federated "
            "member claims are the primary's. Exactly one of `uris`, `embedded`, `glue_config`"
            + (
                "; `database_prefix` is refused (the primary's names are kept)"
                if facts["primary_prefix_refused"]
                else ""
            )
            + ". Set in the file only (no option, no environment variable).",
            "",
            f"**A minimal proxy configuration (a `primary:` with only `name` and `uris`) makes a "
            f"`{access}` primary**: `primary.access_control` defaults to `{access}`.",
        ]
        if access == "read_only":
            lines[-1] += (
                " Clients can read through the proxy but not write or create; set "
                "`access_control: read_and_write_and_create` (or a whitelist mode) to allow it."
            )
        return lines
    if section == "federated":
        allowed = " or ".join(f"`{a}`" for a in facts["federated_access"])
        return [
            "The federated metastores, a list of members with the keys of `primary` (default: none). "
            "Set in the file only (no option, no environment variable). Exactly one of `uris`, "
            f"`embedded`, `glue_config` per member; `access_control` must be {allowed}"
            + (
                "; `read_only_uris` is for the primary only"
                if facts["federated_read_only_uris_refused"]
                else ""
            )
            + ".",
            "",
            f"With `{facts['resolution']}` database resolution (the default) `database_prefix` defaults "
            f"to the member's name and `_` (a member `sales`: `{facts['federated_prefix']}`); with "
            "`manual`, `mapped_databases` is required.",
        ]
    if section == "zones":
        return [
            "Read by `hivemesh replicate`: the zones policies replicate between, a mapping of zone "
            "name to zone; Live Hive's rules name the same zones. Set in the file only (no option, no "
            "environment variable).",
        ]
    if section == "replication":
        return [
            "Read by `hivemesh replicate`: the replicator's store and its policies. Set in the file "
            "only (no option, no environment variable; `hivemesh replicate run --metrics-port` sets "
            "no key).",
        ]
    if section == "live":
        return [
            "Live Hive (in progress: the section is validated, no command serves it yet): the etcd "
            "cluster of the command log and the live databases, one rule each. Set in the file only "
            "(no option, no environment variable). Refused: a rule path of one zone that is, lies "
            "under or contains another zone's rule path or warehouse; a relative rule path; a rule "
            "without a path for every zone; a database of two rules, or both live and in a "
            "`replication:` policy.",
        ]
    if section in ENV_SECTIONS or section in COMMANDS:
        return [f"Read by `hivemesh {COMMANDS.get(section, section)}`."]
    return ["Set in the file only (no option, no environment variable)."]


def _unmapped_options(section: str) -> list[str]:
    """Options of the section's command that set no key (``--config``)."""
    from hivemesh.cli import main as hivemesh

    command_name = COMMANDS.get(section)
    if command_name is None:
        return []
    command = hivemesh.get_command(click.Context(hivemesh), command_name)
    if command is None:
        return []
    fields = _section_model(section).model_fields
    return [
        max(p.opts, key=len)
        for p in command.params
        if isinstance(p, click.Option) and p.name not in fields and not p.hidden
    ]


def render() -> str:
    """The configuration reference as Markdown: one section per top-level key of mesh.yaml, one
    table per model (nested models with dotted keys), generated from the pydantic models, the
    options of the click commands and the environment rule of :func:`hivemesh.config.env_overrides`."""
    facts = _facts()
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated by `python -m hivemesh.config_reference` from the pydantic models and the "
        f"command-line options; do not edit: run `{REGENERATE}`. -->",
        f"_Generated from the code by `python -m hivemesh.config_reference`; do not edit by hand, "
        f"run `{REGENERATE}` (tests/test_config_reference.py fails when this file is stale)._",
        "",
        "One file, `mesh.yaml`, holds every section; each command reads its own sections and ignores "
        "the others' (`hivemesh metastore --config`, `hivemesh proxy --config`, "
        "`hivemesh replicate ... --config`). Unknown keys are errors that name the key. Relative paths "
        "and `sqlite:///` URLs written in the file (stores, warehouses, embedded members, SSH key "
        "files) are relative to the file's directory. A key marked **required** has no default; "
        "`—` means no option or no environment variable sets the key.",
        "",
    ]
    sections: list[tuple[str, str, type[BaseModel]]] = []
    for root in _roots():
        for name, info in root.model_fields.items():
            kind = _nested(info.annotation)
            if kind is None or any(s[0] == name for s in sections):
                continue  # MeshConfig keeps the proxy's sections as plain mappings
            sections.append((name, f"{name}{kind[0]}", kind[1]))
    out.append("Sections: " + ", ".join(f"[`{name}:`](#{name})" for name, _, _ in sections) + ".")
    out.append("")
    for name, key, model in sections:
        out.append(f"## `{name}:`")
        out.append("")
        out.extend(_intro(name, facts))
        unmapped = _unmapped_options(name)
        if unmapped:
            out.append("")
            out.append(
                f"Options of `hivemesh {COMMANDS[name]}` that set no key: "
                + ", ".join(_code(o) for o in unmapped)
                + "."
            )
        for i, table in enumerate(_tables(name, key, model)):
            out.append("")
            if i:
                out.append(f"### `{table.key}`")
                out.append("")
                doc = _first_sentence(table.model.__doc__)
                if doc:
                    out.append(doc)
                    out.append("")
            out.extend(_markdown(table))
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Command line


def check(path: str | Path) -> list[str]:
    """The differences between the file at ``path`` and :func:`render` as unified-diff lines
    (empty when it is up to date; a one-line problem when it cannot be read)."""
    try:
        current = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        return [f"cannot read {path}: {e.strerror}"]
    expected = render()
    if current == expected:
        return []
    return list(
        difflib.unified_diff(
            current.splitlines(),
            expected.splitlines(),
            f"{path} (on disk)",
            f"{path} (from the code)",
            lineterm="",
        )
    )


_ROW = re.compile(r"^[-+]\| `([^`]+)` \|")


def main(argv: list[str] | None = None) -> int:
    """``python -m hivemesh.config_reference [--output FILE | --check FILE]``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m hivemesh.config_reference", description="Render the configuration reference."
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--output", "-o", metavar="FILE", help="write the reference to FILE")
    group.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from the reference")
    args = parser.parse_args(argv)
    if args.check:
        diff = check(args.check)
        if not diff:
            print(f"{args.check} is up to date")
            return 0
        shown = diff[:60]
        keys = list(dict.fromkeys(m.group(1) for m in map(_ROW.match, diff[2:]) if m))
        print(
            f"{args.check} is stale: it differs from the configuration models and options; run "
            f"`{REGENERATE}`.",
            *([f"Keys whose rows differ: {', '.join(keys)}"] if keys else []),
            "Differences (- on disk, + from the code):",
            *shown,
            *([f"... ({len(diff) - len(shown)} more diff lines)"] if len(diff) > len(shown) else []),
            sep="\n",
            file=sys.stderr,
        )
        return 1
    text = render()
    if args.output:
        target = Path(args.output)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
