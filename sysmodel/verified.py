"""The verified-figures table: the only channel from the RTL benches to the system model.

Every entry carries its provenance (parameters, clock, bench, cycles simulated, tool versions), the block's
`rtl` module and the digest of the `rtl/` sources that module is built from. A table with an entry whose
sources have changed since is stale, and loading it fails with a message that names the blocks to re-measure.
"""
import ast
import hashlib
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).with_name("data") / "verified_blocks.json"
SCHEMA = 1


class StaleTableError(RuntimeError):
    """The table is missing, malformed, or was measured on different RTL than the current `rtl/`."""


def rtl_root() -> Path:
    spec = importlib.util.find_spec("rtl")
    if spec is None or not spec.submodule_search_locations:
        raise StaleTableError("the rtl package is not importable, so the table's digest cannot be checked")
    return Path(list(spec.submodule_search_locations)[0])


def rtl_sources(module: str, root: Path | None = None) -> list[Path]:
    """The `rtl/` files a block's module is built from: itself and every rtl module it imports, transitively
    (read from the source with `ast`, so the system model never imports Amaranth)."""
    root = root or rtl_root()
    found: dict[str, Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        if name in found or parts[0] != "rtl":
            continue
        for package in range(1, len(parts)):  # the packages' __init__ files run on import too
            init = root.joinpath(*parts[1:package], "__init__.py")
            if init.exists():
                found.setdefault(".".join(parts[:package]), init)
        path = root.joinpath(*parts[1:]).with_suffix(".py")
        if not path.exists():
            path = root.joinpath(*parts[1:], "__init__.py")
        if not path.exists():
            continue
        found[name] = path
        package = parts if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = base + (node.module.split(".") if node.module else [])
                pending.append(".".join(target))
                pending.extend(".".join(target + [alias.name]) for alias in node.names)  # submodules
            elif isinstance(node, ast.Import):
                pending.extend(alias.name for alias in node.names)
    return sorted(set(found.values()))


def rtl_digest(module: str, root: Path | None = None) -> str:
    """SHA-256 over the relative path and bytes of every `rtl/` source a block's module is built from."""
    root = root or rtl_root()
    digest = hashlib.sha256()
    for path in rtl_sources(module, root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class VerifiedEntry:
    block: str
    params: dict[str, Any]
    figures: dict[str, Any]
    provenance: dict[str, Any]


class VerifiedBlocks:
    """Lookup of measured figures by block, parameters and figure name."""

    def __init__(self, entries: list[VerifiedEntry]) -> None:
        self.entries = entries

    def entry(self, block: str, **params: Any) -> VerifiedEntry:
        """The one entry of `block` whose parameters include `params`; ambiguity is an error."""
        found = [e for e in self.entries
                 if e.block == block and all(e.params.get(k) == v for k, v in params.items())]
        if not found:
            raise KeyError(f"no verified figures for {block} with {params or 'any parameters'}; "
                           f"run `basedie verify {block}`")
        if len(found) > 1:
            choices = "; ".join(", ".join(f"{k}={v}" for k, v in e.params.items()) for e in found)
            raise KeyError(f"{block} has {len(found)} verified parameter sets ({choices}): name the parameters")
        return found[0]

    def figure(self, block: str, name: str, **params: Any) -> Any:
        figures = self.entry(block, **params).figures
        if name not in figures:
            raise KeyError(f"{block} has no measured figure {name!r} (it has: {', '.join(sorted(figures))})")
        return figures[name]


def load(path: Path = TABLE_PATH, rtl: Path | None = None) -> VerifiedBlocks:
    """Read the table, refusing it when any entry was measured on other RTL than the current `rtl/`."""
    try:
        table = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise StaleTableError(f"{path} does not exist: run `basedie verify` to measure the blocks") from None
    except json.JSONDecodeError as error:
        raise StaleTableError(f"{path} is not valid JSON ({error}): run `basedie verify`") from None
    if table.get("schema") != SCHEMA:
        raise StaleTableError(f"{path} has schema {table.get('schema')!r}, expected {SCHEMA}: run `basedie verify`")
    digests: dict[str, str] = {}
    for module in {e["provenance"].get("rtl_module", "") for e in table["entries"]}:
        digests[module] = rtl_digest(module, rtl)
    stale = sorted({e["block"] for e in table["entries"]
                    if e["provenance"]["rtl_digest"] != digests[e["provenance"].get("rtl_module", "")]})
    if stale:
        raise StaleTableError(f"{path} is stale: {', '.join(stale)} measured on other RTL than the current "
                              f"rtl/; run `basedie verify {' '.join(stale)}` to re-measure")
    return VerifiedBlocks([VerifiedEntry(**e) for e in table["entries"]])


def store(entries: list[VerifiedEntry], path: Path = TABLE_PATH, remeasured: Iterable[str] = ()) -> None:
    """Write entries into the table, replacing those with the same block and parameters, and every entry of
    the `remeasured` blocks (whose benches now prove exactly the parameter sets in `entries`)."""
    try:
        existing = json.loads(Path(path).read_text())["entries"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        existing = []
    def key(entry: dict) -> tuple[str, str]:
        return entry["block"], json.dumps(entry["params"], sort_keys=True)

    fresh = [e.__dict__ for e in entries]
    replaced = {key(e) for e in fresh}
    remeasured = set(remeasured)
    kept = [e for e in existing if key(e) not in replaced and e["block"] not in remeasured]
    merged = sorted(kept + fresh, key=key)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"schema": SCHEMA, "entries": merged}, indent=2) + "\n")
