"""What fedbench knows by name, as listings: `fedbench list KIND`, `fedbench list algorithms
NAME` and `fedbench blocks MODEL`.

`KINDS` maps each listable kind to the function that builds its rows; a new kind is one entry
there (its registry's names and first docstring lines, say). Imports are inside the builders so
that the command line starts without loading torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from fedbench.errors import FedbenchError
from fedbench.listing import Listing

if TYPE_CHECKING:
    from fedbench.registry import Registry


def first_line(doc: str | None) -> str:
    """A docstring's first paragraph on one line (a sentence may span source lines)."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def _table_configs(what: str) -> Listing:
    from fedbench.config import read_yaml
    from fedbench.runner.table_config import find_table, list_tables

    kind: Literal["table", "ablation"] = "table" if what == "tables" else "ablation"
    rows = []
    for name in list_tables(kind):
        path = find_table(name, kind)
        data = read_yaml(path)
        presets = ", ".join(sorted(data.get("presets") or {})) if isinstance(data, dict) else ""
        rows.append([name, str(data.get("title", "")), presets, str(path)])
    return Listing(what, ["name", "title", "presets", "file"], rows)


def _with_plugins(registry: Registry[Any], listing: Listing) -> Listing:
    """`listing` (rows named by the registry's names) with a `plugin` column naming the plugin
    that registered each row, where any did; unchanged when every name is fedbench's own."""
    owners = [registry.origin(row[0]) for row in listing.rows]
    if not any(owners):
        return listing
    rows = [
        [*row, o.source.short if o else "-"] for row, o in zip(listing.rows, owners, strict=True)
    ]
    return Listing(listing.title, [*listing.columns, "plugin"], rows)


def _algorithms() -> Listing:
    from fedbench.algorithms import ALGORITHMS

    rows = [
        [name, cls.paper, cls.comm_up_label, cls.client_state_desc]
        for name, cls in ALGORITHMS.items()
    ]
    listing = Listing("algorithms", ["name", "paper", "comm_up", "per-client state"], rows)
    return _with_plugins(ALGORITHMS, listing)


def _described(kind: str) -> Listing:
    """A registry's names with the first line of each entry's docstring."""
    registry: Registry[Any]
    if kind == "datasets":
        from fedbench.data import DATASETS as registry
    elif kind == "models":
        from fedbench.models import MODELS as registry
    else:
        from fedbench.partitions import PARTITIONS as registry

    rows = [[name, first_line(obj.__doc__)] for name, obj in registry.items()]
    return _with_plugins(registry, Listing(kind, ["name", "description"], rows))


def _figures() -> Listing:
    from fedbench.figures import FIGURES

    rows = [
        [name, cls.paper, cls.title, ", ".join(sorted(cls.presets))]
        for name, cls in FIGURES.items()
    ]
    listing = Listing("figures", ["name", "paper", "what it shows", "presets"], rows)
    return _with_plugins(FIGURES, listing)


#: Every kind `fedbench list KIND` shows, in the order the help names them.
KINDS: dict[str, Callable[[], Listing]] = {
    "tables": lambda: _table_configs("tables"),
    "ablations": lambda: _table_configs("ablations"),
    "algorithms": _algorithms,
    "datasets": lambda: _described("datasets"),
    "models": lambda: _described("models"),
    "partitions": lambda: _described("partitions"),
    "figures": _figures,
}


def listing(kind: str) -> Listing:
    """The listing of one kind; an unknown kind is an error naming the closest one."""
    build = KINDS.get(kind)
    if build is None:
        from fedbench.suggest import did_you_mean

        raise FedbenchError(
            f"cannot list {kind!r};{did_you_mean(kind, KINDS)} choose {', '.join(KINDS)}"
        )
    return build()


def algorithm_card(name: str) -> list[str | Listing]:
    """Every hyperparameter of algorithm NAME: type, default, range and meaning, after a
    header with its paper, its first docstring line, its upload and its per-client state."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.fields import field_rows

    cls = ALGORITHMS.get(name)
    plugin = ALGORITHMS.origin(name)
    header = (
        f"{name}: {cls.paper}\n{first_line(cls.__doc__)}\n"
        f"upload per client and round: {cls.comm_up_label}; per-client state: "
        f"{cls.client_state_desc}"
        + (f"\nfrom plugin {plugin.line()}" if plugin is not None else "")
    )
    rows = field_rows(cls.Params, skip=("name",))
    return [
        header,
        Listing(
            f"{name} hyperparameters (--set algorithm.FIELD=VALUE)",
            ["field", "type", "default", "range", "meaning"],
            [[r.name, r.type, r.default, r.range, r.meaning] for r in rows],
        ),
    ]


def catalog(kind: str, name: str | None = None) -> list[str | Listing]:
    """`fedbench list KIND [NAME]`: the listing of KIND, or with a NAME (algorithms only) that
    algorithm's card."""
    if name is None:
        return [listing(kind)]
    if kind != "algorithms":
        raise FedbenchError(f"a NAME applies to `fedbench list algorithms NAME`, not {kind}")
    return algorithm_card(name)


def block_view(
    model: str, kind: str = "auto", overrides: list[str] | None = None
) -> list[str | Listing]:
    """`fedbench blocks MODEL`: FedAdamW's blocks per trainable tensor of MODEL under partition
    KIND (`auto` shows which partition it picks), then a line with d, the tensors and B."""
    from fedbench.algorithms.blocks import BLOCK_KINDS, block_layout, resolve_blocks
    from fedbench.config import load_run_config
    from fedbench.engine.setup import model_and_spec

    if kind not in BLOCK_KINDS:
        raise FedbenchError(
            f"--kind {kind} is not a partition; use one of {', '.join(BLOCK_KINDS)}"
        )
    cfg = load_run_config(None, [f"model.name={model}", *(overrides or [])])
    spec = model_and_spec(cfg)
    resolved = resolve_blocks(kind, spec)
    rows = block_layout(spec, resolved)
    shown = f"auto -> {resolved}" if kind == "auto" else kind
    return [
        Listing(
            f"{model}: blocks: {shown}",
            ["parameter", "shape", "blocks"],
            [[n, "x".join(map(str, s)), str(c)] for n, s, c in rows],
        ),
        f"blocks: {shown}  d {spec.d}  tensors {len(rows)}  B {sum(c for *_, c in rows)}",
    ]
