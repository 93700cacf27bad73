"""Reading a YAML (or JSON) request file with bounds: its size before it is read
(planner.files.REQUEST), its values before anything is composed from them, and no key twice.

A request is a few hundred values; a hostile one is a 4 MiB list of `1,` (two million values) or
a billion-laughs document (nine aliases of nine aliases of ...: 10^9 values from a few hundred
bytes). Composing either builds every node in memory first, so the values are counted from the
parser's event stream (LibYAML's C parser where installed): an alias adds the size of what its
anchor stands for, an alias to a collection still open (a recursive document) is past any limit,
and the count stops as soon as it passes MAX_YAML_NODES. Only then is the document composed and
built, by the same C parser (a second parse costs less than composing from Python events).

YAML lets a mapping hold a key twice and keeps the last value; a request with `slo:` twice
means one of them is ignored without a word, so that is refused, naming both lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from planner.errors import InvalidInput
from planner.files import REQUEST, read_text

MAX_YAML_NODES = 1_000_000  # values once aliases are expanded: a billion-laughs document is refused

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(_Base):
    """The safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:  # `<<: *base`: explicit keys may override merged ones
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:  # an unhashable key: the constructor says so
                    continue
                if earlier is not key_node:
                    raise _DuplicateKey(key, earlier, key_node)
        result: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return result


class _DuplicateKey(Exception):
    def __init__(self, key: Any, earlier: yaml.Node, later: yaml.Node) -> None:
        self.key, self.earlier, self.later = key, earlier, later

    def reason(self) -> str:
        a, b = self.earlier.start_mark.line + 1, self.later.start_mark.line + 1
        return f"key {self.key!r} is given twice in one mapping (line {a} and line {b})"


def count_values(text: str, limit: int = MAX_YAML_NODES) -> int:
    """Values in the YAML `text` with aliases expanded, counted from the parser's events without
    composing; stops past `limit` (returns limit + 1, as for a recursive alias)."""
    loader = _Base(text)
    count = 0
    sizes: dict[str, int] = {}  # anchor -> values it stands for
    started: list[tuple[str | None, int]] = []  # open collections: (anchor, count before them)
    try:
        while count <= limit and loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                if any(anchor == event.anchor for anchor, _ in started):
                    return limit + 1  # recursive: infinite once expanded
                count += sizes.get(event.anchor or "", 1)  # an undefined alias fails composition
            elif isinstance(event, yaml.ScalarEvent):
                count += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.CollectionStartEvent):
                started.append((event.anchor, count))
                count += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, before = started.pop()
                if anchor is not None:
                    sizes[anchor] = count - before
    finally:
        loader.dispose()
    return min(count, limit + 1)


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"not valid YAML{where}: {problem}"


def load_yaml_text(text: str, field: str) -> Any:
    """The data of one YAML document, refused (InvalidInput naming `field`) past MAX_YAML_NODES
    values, with a key given twice, or when it is not YAML."""
    try:
        if count_values(text) > MAX_YAML_NODES:
            raise InvalidInput(
                field,
                f"expands to more than {MAX_YAML_NODES:,} values (an alias counts as what it stands for); "
                "not a request",
            )
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
            return None if root is None else loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise InvalidInput(field, _yaml_reason(exc)) from None
    except _DuplicateKey as exc:
        raise InvalidInput(field, exc.reason()) from None
    except RecursionError:
        raise InvalidInput(field, "not valid YAML: nested too deeply") from None


def read_mapping_file(path: str | Path, expected: str = "deployment: and workload:") -> dict[str, Any]:
    """A YAML (or JSON) file holding a mapping; errors name the file. Devices, FIFOs, files over
    planner.files.REQUEST's size, alias bombs and duplicate keys are refused before anything is
    built from them."""
    field = str(path)
    data = load_yaml_text(read_text(path, field, REQUEST, missing="no such file"), field)
    if data is None:
        raise InvalidInput(field, f"is empty; expected {expected}")
    if not isinstance(data, dict):
        raise InvalidInput(field, f"expected a mapping with {expected}, got {type(data).__name__}")
    return data
