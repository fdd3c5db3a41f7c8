"""The one YAML loader of fedbench: every YAML it reads (run and table configs, tuned.yaml, a run
folder's config.yaml, `--set` and `--grid` values) goes through `load_yaml`.

On top of PyYAML's SafeLoader (no Python tags, so no code runs), it refuses

- a mapping with the same key twice (PyYAML would keep the last silently), and
- aliases that expand to too much: a few hundred bytes of nested anchors (`&a [x, x, ...]`,
  `&b [*a, *a, ...]`, ... nine levels of ten) stand for 10**9 values. PyYAML builds them as
  shared references, cheaply; the first copy, JSON dump or validation of the result expands them
  and exhausts memory. The expanded size is counted on the composed node graph, before any
  Python object is built, so a bomb costs nothing but its own bytes.
"""

from __future__ import annotations

from typing import Any

import yaml

#: The largest YAML file fedbench parses (a run or table config, tuned.yaml, a run folder's
#: config.yaml): checked before parsing, since PyYAML builds the whole document in memory at about
#: 10 s and 200 MB per MiB. The largest config fedbench ships is 6 KB.
MAX_YAML_BYTES = 2**20

#: The most values (scalars, and one per list or mapping) a YAML document may expand to. The
#: largest config fedbench ships holds a few thousand; this is far above any real config.
MAX_YAML_VALUES = 1_000_000


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a mapping with the same key twice, and a document whose
    aliases expand past MAX_YAML_VALUES values."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base`: merged keys may be overridden by the explicit ones
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_document(self, node: yaml.Node) -> Any:
        check_expansion(node)
        return super().construct_document(node)


def check_expansion(root: yaml.Node, limit: int = MAX_YAML_VALUES) -> None:
    """Raise a yaml.YAMLError if the document under `root` expands to more than `limit` values.

    Sizes are memoised per node, so a node reached through many aliases is counted once per
    reference without being walked again: linear in the document's own size. A node that contains
    itself (a recursive alias) is infinite.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise _too_big(node, "an alias refers to a node that contains it")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_nodes.discard(key)
        if total > limit:
            raise _too_big(node, f"its aliases expand to more than {limit:,} values")
        sizes[key] = total
        return total

    size(root)


def _too_big(node: yaml.Node, why: str) -> yaml.YAMLError:
    return yaml.constructor.ConstructorError(None, None, why, node.start_mark)


def load_yaml(text: str) -> Any:
    """Parse YAML text with UniqueKeyLoader (a yaml.YAMLError on a malformed document)."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader
    except RecursionError:
        # PyYAML composes nested collections recursively: `[[[[...` thousands deep.
        raise yaml.error.MarkedYAMLError(problem="collections nested too deeply") from None
