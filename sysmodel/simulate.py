"""One simulation: resolve the configuration, build the system, run the requests, collect the metrics."""
from dataclasses import asdict, dataclass, field

from basedie import verified
from .arbitration import POLICIES
from .engine import EventLoop, Request
from .execution import pnm_entries
from .errors import ConfigError, require
from .hardware import HARDWARE_PRESETS, Hardware
from .llm import LLM, resolve_model
from .metrics import request_row, summarize
from .systems import SYSTEMS, Setting, build
from .workload import FixedBatch, PoissonArrivals


@dataclass(frozen=True)
class SimulationConfig:
    system: str
    model: str | LLM
    workload: FixedBatch | PoissonArrivals
    hardware: str | Hardware = "paper"
    mmu_policy: str = "prefill-first"
    max_batch: int = 16
    chunk_tokens: int | None = None


@dataclass
class Result:
    config: dict
    requests: list[Request]
    summary: dict
    rows: list[dict] = field(default_factory=list)


def resolve_hardware(spec: str | Hardware) -> Hardware:
    if isinstance(spec, Hardware):
        return spec
    if spec not in HARDWARE_PRESETS:
        raise ConfigError(f"unknown hardware {spec!r}; choose one of {', '.join(HARDWARE_PRESETS)}")
    return HARDWARE_PRESETS[spec]


def simulate(config: SimulationConfig, table: verified.VerifiedBlocks | None = None) -> Result:
    """Run `config`; `table` defaults to the committed verified-figures table (refused when stale)."""
    require(config.system in SYSTEMS, f"unknown system {config.system!r}; choose one of {', '.join(SYSTEMS)}")
    require(config.mmu_policy in POLICIES,
            f"unknown MMU policy {config.mmu_policy!r}; choose one of {', '.join(POLICIES)}")
    model = config.model if isinstance(config.model, LLM) else resolve_model(config.model)
    hardware = resolve_hardware(config.hardware)
    setting = Setting(hardware, model, table if table is not None else verified.load(), config.mmu_policy,
                      config.max_batch, config.chunk_tokens)
    loop = EventLoop()
    system = build(config.system, setting, loop)
    requests = config.workload.generate()
    for request in requests:
        loop.at(request.arrival, lambda request=request: system.submit(request))
    loop.run()
    unfinished = [r.id for r in requests if not r.done]
    if unfinished:  # a scheduling dead end is a bug, never a silent partial result
        raise RuntimeError(f"{len(unfinished)} requests never finished (first: {unfinished[:5]})")
    summary = summarize(requests, system.accounts, hardware.link.energy_per_bit,
                        hardware.gpus * hardware.gpu.flops, hardware.gpus * hardware.gpu.memory.bandwidth)
    resolved = {
        "system": config.system, "system_spec": repr(SYSTEMS[config.system]), "model": asdict(model),
        "workload": {"kind": type(config.workload).__name__, **asdict(config.workload)},
        "hardware": _plain(asdict(hardware)), "max_batch": config.max_batch,
        "mmu_policy": config.mmu_policy if config.system == "duopd" else None,
        "chunk_tokens": setting.chunk if config.system == "chunked" else None,
        "verified_blocks": _used_figures(setting) if config.system == "duopd" else {},
    }
    return Result(resolved, requests, summary, [request_row(r) for r in requests])


def _plain(value):
    """Dataclass dicts with tuples and nested objects as JSON-friendly values."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)


def _used_figures(setting: Setting) -> dict:
    """Provenance of the verified figures a DuoPD run rests on."""
    lane, array = pnm_entries(setting.table, setting.hardware.pnm)
    mmu = setting.table.entry("mmu", out_of_order=False)
    return {name: {"params": e.params, "sources_digest": e.provenance["sources_digest"]}
            for name, e in (("pnm_lane", lane), ("pnm_array", array), ("mmu", mmu))}
