"""The generated tables of docs/reference/configuration.md: the configuration's fields with their options and help,
and every registry's entries. `python -m sysmodel.reference` rewrites the tables in place (between
`<!-- table: NAME -->` and `<!-- end -->`); a test checks that the page is current."""
import re
from dataclasses import fields
from pathlib import Path

from .config import SimulationConfig
from .deployments import ROUTERS, SCHEDULERS
from .hbf.layout import PRESETS as LAYOUTS
from .llm import MODEL_PRESETS
from .perf import PERF_MODELS
from .presets import PRESETS
from .systems import SYSTEMS

PAGE = Path(__file__).parents[1] / "docs" / "reference" / "configuration.md"
TABLE = re.compile(r"(<!-- table: (?P<name>[a-z-]+) -->\n).*?(<!-- end -->)", re.S)


def _table(header: tuple[str, ...], rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _options() -> str:
    rows = []
    for f in fields(SimulationConfig):
        for option in f.metadata["options"]:
            text = option.help() if callable(option.help) else option.help
            rows.append((f"`{f.name}`", f"`{option.flag}`", "required" if option.required else
                         f"`{option.default}`" if option.default not in (None, []) else "", text))
    return _table(("field", "option", "default", "help"), rows)


def _registry(registry) -> str:
    return _table(("name", "what it is"), ((f"`{name}`", registry.help(name)) for name in registry))


def _systems() -> str:
    return _table(("name", "spec", "what it is"),
                  ((f"`{name}`", f"`{spec!r}`", SYSTEMS.help(name)) for name, spec in SYSTEMS.items()))


def _hardware() -> str:
    return _table(("name", "GPU", "GPUs", "scale-up link"),
                  ((f"`{name}`", hw.gpu.name, hw.gpus, hw.link.name) for name, hw in PRESETS.items()))


def _layouts() -> str:
    return _table(("name", "HBM stacks", "HBF stacks", "weights", "KV cache", "frame cache GiB", "what it is"),
                  ((f"`{name}`", lay.hbm_stacks, lay.hbf_stacks, lay.weights, lay.kv, lay.frame_cache_gib,
                    LAYOUTS.help(name)) for name, lay in LAYOUTS.items()))


def _models() -> str:
    return _table(("name", "layers", "hidden", "heads / KV heads", "experts (per token)"),
                  ((f"`{name}`", m.layers, m.hidden, f"{m.heads} / {m.kv_heads}",
                    f"{m.experts} ({m.experts_per_token})" if m.moe else "-") for name, m in MODEL_PRESETS.items()))


TABLES = {"options": _options, "systems": _systems, "schedulers": lambda: _registry(SCHEDULERS),
          "routers": lambda: _registry(ROUTERS), "performance-models": lambda: _registry(PERF_MODELS),
          "layouts": _layouts, "hardware": _hardware, "models": _models}


def update(text: str) -> str:
    """`text` with every marked table regenerated; an unknown table name is an error."""
    def table(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise ValueError(f"unknown table {name!r} (known: {', '.join(TABLES)})")
        return match[1] + "\n" + TABLES[name]() + "\n" + match[3]
    return TABLE.sub(table, text)


if __name__ == "__main__":
    PAGE.write_text(update(PAGE.read_text()))
