"""Extract `vllm serve`'s arguments (names, value types, choices) from a vLLM source tree into
the data file the flag test checks every plan's flags against (tests/test_vllm_args.py).

    python tools/vllm_serve_args.py --source DIR [--source-label TEXT] [--out FILE]

DIR is the root of a vLLM source tree or unpacked release (it holds `vllm/`): a git checkout of
a release tag, or the release wheel from PyPI unpacked (the wheel carries the Python sources and
`vllm/_version.py` with the version and commit). The output (default
planner/data/vllm/serve-args-<version>.json) records the version, the commit, where the source
came from and the files read. Dev-time only: run by hand when VLLM_IMAGE (planner/export.py)
moves to another release; nothing reads vLLM at run time.

vLLM's own parser is built by importing vLLM (torch, CUDA), so this reads the source with `ast`
instead, the way vLLM 0.11 builds it: `make_arg_parser` (vllm/entrypoints/openai/cli_args.py)
adds its own arguments, one per `FrontendArgs` field, then `AsyncEngineArgs.add_cli_args`
(vllm/engine/arg_utils.py), whose `add_argument("--flag", **kwargs["field"])` calls take their
type from a config dataclass field through `get_kwargs`: bool -> `--flag` / `--no-flag`,
Literal -> choices, a dataclass -> JSON validated against its fields, int / float / str / list
-> values. Flags named by a variable (loops over deprecated names) and choices computed at run
time are listed under `unresolved` rather than guessed.

Copies no vLLM code: only argument names, types and choices, as data, with their source
(vLLM is Apache-2.0).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "planner" / "data" / "vllm"
CLI_ARGS = "vllm/entrypoints/openai/cli_args.py"
ARG_UTILS = "vllm/engine/arg_utils.py"
MAX_DEPTH = 12  # import hops and nested type aliases followed for one name
LICENSE = (
    "Argument names, types and choices extracted from vLLM (https://github.com/vllm-project/vllm), "
    "Copyright contributors to the vLLM project, licensed under the Apache License 2.0"
)


@dataclass
class Kind:
    """What an argument takes: `type` int | float | str | bool | json | list | unknown;
    `choices` (None: any value of the type); `fields`: a JSON argument's dataclass fields (name
    -> Kind), validated by vLLM with pydantic."""

    type: str
    choices: list[Any] | None = None
    fields: dict[str, Kind] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.choices is not None:
            out["choices"] = self.choices
        if self.fields is not None:
            out["fields"] = {k: v.to_json() for k, v in sorted(self.fields.items())}
        return out


@dataclass
class Source:
    """Modules of one source tree, parsed once."""

    root: Path
    read: set[str] = field(default_factory=set)
    _trees: dict[str, ast.Module | None] = field(default_factory=dict)

    def module(self, dotted: str) -> tuple[str, ast.Module] | None:
        rel = dotted.replace(".", "/")
        for path in (f"{rel}.py", f"{rel}/__init__.py"):
            if path not in self._trees:
                f = self.root / path
                self._trees[path] = ast.parse(f.read_text(), path) if f.is_file() else None
            tree = self._trees[path]
            if tree is not None:
                self.read.add(path)
                return dotted, tree
        return None

    def definitions(self, dotted: str, name: str) -> list[tuple[str, ast.AST]]:
        """Every top-level (or TYPE_CHECKING-guarded) definition of `name` in module `dotted`:
        classes, assignments, and the modules it is imported from (as ("import", module))."""
        got = self.module(dotted)
        if got is None:
            return []
        out: list[tuple[str, ast.AST]] = []
        for node in ast.walk(got[1]):
            if isinstance(node, ast.ClassDef) and node.name == name:
                out.append((dotted, node))
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                out.append((dotted, node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.target.id == name and node.value is not None:
                    out.append((dotted, node.value))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name and node.module.startswith("vllm"):
                        out.append((node.module, ast.Name(id=alias.name)))
        return out


def _is_any(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "Any"


class Types:
    """Annotations to Kinds, following vLLM's names across modules."""

    def __init__(self, src: Source) -> None:
        self.src = src

    def lookup(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
        """The definition `name` refers to in `module` (a class or an alias value), preferring
        a real one to a run-time `Any` stand-in."""
        if depth > MAX_DEPTH:
            return None
        for mod, node in self.src.definitions(module, name):
            if isinstance(node, ast.Name) and mod != module:  # imported: follow it
                found = self.lookup(mod, node.id, depth + 1)
                if found is not None:
                    return found
            elif not _is_any(node):
                return mod, node
        return None

    def kind(self, module: str, node: ast.AST | None, depth: int = 0) -> Kind:
        """In get_kwargs's order: a dataclass (JSON), bool, Literal (choices), tuple / list,
        int, float, dict (JSON), str."""
        members = self.members(module, node, depth)
        literals = list(dict.fromkeys(v for m in members if m[0] == "literal" for v in m[1]))
        names = {m[1] for m in members if m[0] == "name"}
        for cls_mod, cls in (m[1] for m in members if m[0] == "class"):
            return Kind("json", fields=self.fields(cls_mod, cls, depth + 1))
        if "bool" in names:
            return Kind("bool")
        if literals:
            return Kind("int" if all(isinstance(v, int) for v in literals) else "str", literals)
        for t in ("tuple", "list", "int", "float", "dict", "str"):
            if t in names:
                return Kind({"dict": "json", "tuple": "list"}.get(t, t))
        return Kind("unknown")

    def members(self, module: str, node: ast.AST | None, depth: int) -> list[tuple[str, Any]]:
        """The alternatives of an annotation: ("literal", values), ("name", builtin), ("class",
        (module, ClassDef))."""
        if node is None or depth > MAX_DEPTH:
            return []
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):  # a string annotation
                return self.members(module, ast.parse(node.value, mode="eval").body, depth + 1)
            return [("name", "None")] if node.value is None else []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.members(module, node.left, depth + 1) + self.members(module, node.right, depth + 1)
        if isinstance(node, ast.Subscript):
            head = _name(node.value)
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == "Literal":
                out: list[tuple[str, Any]] = []
                for a in args:
                    if isinstance(a, ast.Constant):
                        out.append(("literal", [a.value]))
                    else:
                        out += self.members(module, a, depth + 1)
                return out
            if head in ("Optional", "Union", "Annotated", "SkipValidation"):
                chosen = args[:1] if head == "Annotated" else args
                out = [] if head != "Optional" else [("name", "None")]
                for a in chosen:
                    out += self.members(module, a, depth + 1)
                return out
            return (
                [("name", head.lower())] if head in ("list", "List", "dict", "Dict", "tuple", "Tuple") else []
            )
        name = _name(node)
        if name in ("int", "float", "str", "bool", "dict", "list", "tuple", "None"):
            return [("name", name)]
        if name is None:
            return []
        found = self.lookup(module, name, depth + 1)
        if found is None:
            return [("name", "unknown")]
        mod, definition = found
        if isinstance(definition, ast.ClassDef):
            return [("class", (mod, definition))]
        return self.members(mod, definition, depth + 1)

    def fields(self, module: str, cls: ast.ClassDef, depth: int = 0) -> dict[str, Kind]:
        """A dataclass's fields (annotated class attributes, private ones left out)."""
        if depth > MAX_DEPTH:
            return {}
        out = {}
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                name = stmt.target.id
                if not name.startswith("_") and _name(stmt.annotation) != "ClassVar":
                    out[name] = self.kind(module, stmt.annotation, depth + 1)
        return out

    def field_of(self, module: str, cls_name: str, field_name: str) -> Kind:
        found = self.lookup(module, cls_name)
        if found is None or not isinstance(found[1], ast.ClassDef):
            return Kind("unknown")
        mod, cls = found
        for stmt in cls.body:
            is_field = isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            if is_field and stmt.target.id == field_name:  # type: ignore[attr-defined]
                return self.kind(mod, stmt.annotation)  # type: ignore[attr-defined]
        return Kind("unknown")


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return None


@dataclass
class Parser:
    """The arguments found, by flag (every alias, `--no-` forms included)."""

    types: Types
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)

    def add(self, flags: list[str], kind: Kind, negatable: bool = False) -> None:
        entry = {"aliases": sorted(flags), **kind.to_json()}
        for f in flags:
            self.args[f] = entry
        if negatable:
            for f in flags:
                if f.startswith("--"):
                    self.args["--no-" + f[2:]] = {"aliases": [], "type": "bool"}

    def calls(self, module: str, func: ast.FunctionDef, where: str) -> None:
        """Every `*.add_argument(...)` in `func`, kwargs resolved through `x = get_kwargs(Cls)`."""
        sources: dict[str, str] = {}
        for node in ast.walk(func):
            call = node.value if isinstance(node, ast.Assign) else None
            if isinstance(call, ast.Call) and _name(call.func) == "get_kwargs" and call.args:
                cls = _name(call.args[0])
                for t in node.targets:  # type: ignore[attr-defined]
                    if isinstance(t, ast.Name) and cls is not None:
                        sources[t.id] = cls
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and _name(node.func) == "add_argument":
                self.call(module, node, sources, where)

    def call(self, module: str, node: ast.Call, sources: dict[str, str], where: str) -> None:
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(flags) != len(node.args):
            self.unresolved.append(f"{where}:{node.lineno}: a flag named by an expression")
            return
        if not flags[0].startswith("-"):
            return  # a positional (the model tag)
        kw = {k.arg: k.value for k in node.keywords if k.arg is not None}
        spread = [k.value for k in node.keywords if k.arg is None]
        kind = Kind("unknown")
        negatable = False
        for s in spread:  # **x_kwargs["field"]
            if isinstance(s, ast.Subscript) and isinstance(s.value, ast.Name) and s.value.id in sources:
                key = s.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    kind = self.types.field_of(module, sources[s.value.id], key.value)
                    negatable = kind.type == "bool"
        action = kw.get("action")
        if action is not None:
            act = action.value if isinstance(action, ast.Constant) else _name(action)
            if act in ("store_true", "store_false"):
                kind, negatable = Kind("bool"), False
            elif act == "BooleanOptionalAction":
                kind, negatable = Kind("bool"), True
        if kind.type == "unknown" and not spread:  # argparse's default type is str
            t = _name(kw["type"]) if "type" in kw else "str"
            kind = Kind({"int": "int", "float": "float", "str": "str"}.get(t or "", "unknown"))
        if "choices" in kw:
            c = kw["choices"]
            if isinstance(c, ast.List | ast.Tuple) and all(isinstance(e, ast.Constant) for e in c.elts):
                kind = Kind(kind.type, [e.value for e in c.elts])  # type: ignore[attr-defined]
            else:
                kind = Kind(kind.type)
                self.unresolved.append(f"{where}:{node.lineno}: {flags[0]} choices computed at run time")
        self.add(flags, kind, negatable)


def _function(tree: ast.Module, name: str, cls: str | None = None) -> ast.FunctionDef:
    body: list[ast.stmt] = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


def extract(root: Path) -> tuple[dict[str, Any], list[str], list[str]]:
    """(arguments by flag, unresolved notes, files read) of `vllm serve` in the tree at `root`."""
    src = Source(root)
    types = Types(src)
    parser = Parser(types)
    cli = src.module("vllm.entrypoints.openai.cli_args")
    engine = src.module("vllm.engine.arg_utils")
    if cli is None or engine is None:
        raise SystemExit(f"{root}: no {CLI_ARGS} or {ARG_UTILS}; give the root of a vLLM source tree")
    cli_mod, cli_tree = cli
    parser.calls(cli_mod, _function(cli_tree, "make_arg_parser"), CLI_ARGS)
    frontend = next(n for n in cli_tree.body if isinstance(n, ast.ClassDef) and n.name == "FrontendArgs")
    for name, kind in types.fields(cli_mod, frontend).items():
        parser.add(["--" + name.replace("_", "-")], kind, kind.type == "bool")
    eng_mod, eng_tree = engine
    parser.calls(eng_mod, _function(eng_tree, "add_cli_args", "EngineArgs"), ARG_UTILS)
    parser.calls(eng_mod, _function(eng_tree, "add_cli_args", "AsyncEngineArgs"), ARG_UTILS)
    return dict(sorted(parser.args.items())), parser.unresolved, sorted(src.read)


def version_of(root: Path) -> tuple[str, str | None]:
    """(version, commit) from vllm/_version.py (setuptools-scm writes it into releases)."""
    f = root / "vllm" / "_version.py"
    if not f.is_file():
        raise SystemExit(f"{f} not found: give --version")
    text = f.read_text()
    v = re.search(r"^__version__ = version = '([^']+)'", text, re.M)
    c = re.search(r"^__commit_id__ = commit_id = '([^']+)'", text, re.M)
    if v is None:
        raise SystemExit(f"{f}: no __version__")
    return v.group(1), None if c is None else c.group(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", type=Path, required=True, help="root of a vLLM source tree (holds vllm/)")
    ap.add_argument("--source-label", default="", help="where the tree came from (recorded as is)")
    ap.add_argument("--version", default=None, help="default: vllm/_version.py's")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    version, commit = version_of(a.source) if a.version is None else (a.version, None)
    arguments, unresolved, files = extract(a.source)
    out = a.out or OUT_DIR / f"serve-args-{version}.json"
    data = {
        "vllm_version": version,
        "commit": commit,
        "source": a.source_label or str(a.source),
        "files": files,
        "license": LICENSE,
        "generated_by": "tools/vllm_serve_args.py",
        "unresolved": unresolved,
        "arguments": arguments,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    print(f"{out}: {len(arguments)} flags of vllm serve {version}; {len(unresolved)} unresolved")
    for u in unresolved:
        print("  unresolved:", u)
    return 0


if __name__ == "__main__":
    sys.exit(main())
