"""One simulation: resolve the configuration, build the system, run the requests, collect the metrics.

Arrivals later than 1e7 s are counted from the first one (a trace stamped in epoch seconds would otherwise
lose the resolution of a token time: a double near 1e12 s resolves 0.1 ms), and a result that is not finite
is an error, not a row of nulls."""
import logging
import math
import sys
import time
from dataclasses import asdict, dataclass, field

from basedie import verified
from .config import SimulationConfig, resolve
from .engine import EventLoop, Request
from .execution import pnm_entries, vector_entries
from .errors import ConfigError, require
from .hbf.media import PROVENANCE
from .metrics import request_row, summarize
from .quantized import dqb_entry, sz_source
from .systems import Setting, build

log = logging.getLogger(__name__)


@dataclass
class Result:
    config: dict
    requests: list[Request]
    summary: dict
    temperatures: list[tuple] = field(default_factory=list)   # (s, GPU, HBM, HBF C, throttle state) with HBF

    @property
    def rows(self) -> list[dict]:
        """Each request's latencies (`metrics.request_row`), built when asked for: a run does not hold a dict per
        request."""
        return [request_row(r) for r in self.requests]


def simulate(config: SimulationConfig, table: verified.VerifiedBlocks | None = None,
             progress: bool = False) -> Result:
    """Run `config`; `table` defaults to the committed verified-figures table (refused when stale); `progress`
    shows the requests arrived so far as a bar on a terminal's stderr (a long trace replay runs for minutes)."""
    setting = resolve(config, table)
    spec, model, hardware, layout, decode_hardware = (setting.spec, setting.model, setting.hardware, setting.layout,
                                                      setting.decode_hardware)
    machines = [hardware] + ([decode_hardware] if decode_hardware is not None else [])
    loop = EventLoop()
    system = build(config.system, setting, loop, spec)
    requests = _with_shared_prefix(_from_first_arrival(config.workload.generate()), config.shared_prefix_tokens)
    submit = _counted(system.submit, len(requests)) if progress else system.submit
    loop.arrivals(requests, submit)
    started = time.perf_counter()
    loop.run()
    if progress:
        submit.bar.close()
    log.info("%s: %d requests on %s simulated in %.2f s", config.system, len(requests), model.name,
             time.perf_counter() - started)
    unfinished = [r.id for r in requests if not r.done]
    if unfinished:  # a scheduling dead end is a bug, never a silent partial result
        raise RuntimeError(f"{len(unfinished)} requests never finished (first: {unfinished[:5]})")
    _require_finite_times(requests)
    summary = summarize(requests, system.accounts, hardware.link.energy_per_bit,
                        sum(m.gpus * m.gpu.flops for m in machines),
                        sum(m.gpus * m.gpu.memory.bandwidth for m in machines))
    for service in system.hbf:
        service.settle(math.inf)
    if system.hbf:
        summary["hbf"] = _hbf_summary([service.summary() for service in system.hbf])
    _require_finite_summary(summary)
    resolved = {
        "system": config.system, "system_spec": repr(spec), "model": asdict(model),
        "workload": {"kind": type(config.workload).__name__, **asdict(config.workload)},
        "hardware": _plain(asdict(hardware)), "max_batch": config.max_batch, "perf_model": config.perf_model,
        "all_reduce": config.all_reduce, "allreduce_overlap": config.overlap,
        "iteration_overhead_s": config.iteration_overhead_s,
        "decode_hardware": _plain(asdict(decode_hardware)) if decode_hardware is not None else None,
        "mmu_policy": config.mmu_policy if "mmu_policy" in spec.options else None,
        "chunk_tokens": setting.chunk if "chunk_tokens" in spec.options else None,
        "quantization": asdict(config.quantization),
        "verified_blocks": _used_figures(setting),
        "memory": asdict(layout) if layout is not None else "hbm",
        "shared_prefix_tokens": config.shared_prefix_tokens,
        "base_die_power": _base_die_power(setting),
    }
    for name, used in resolved["verified_blocks"].items():
        log.info("verified figures used: %s %s", name, used["params"])
    if system.hbf:
        resolved["hbf"] = {**asdict(config.hbf), "stack": asdict(system.hbf[0].stack),
                           "provenance": [asdict(p) for p in PROVENANCE]}
    return Result(resolved, requests, summary, system.hbf[0].trace if system.hbf else [])


def _hbf_summary(parts: list[dict]) -> dict:
    """The instances' HBF figures: GPUs, traffic and counts summed, the hottest package's temperatures and the
    first instance's throttle residency, frame-cache size and object size (instances of one system run alike),
    rates over the sums."""
    total = {key: sum(p[key] for p in parts) for key, value in parts[0].items() if isinstance(value, float)
             and key not in ("object_bytes", "pe_cycles_per_block", "kv_pe_cycles_per_block", "stall_s",
                             "cooling_wait_s")}
    accesses = total["accesses"]
    return {**total,
            "gpus": sum(p["gpus"] for p in parts),
            "frame_cache_objects": parts[0]["frame_cache_objects"],
            "object_bytes": parts[0]["object_bytes"],
            "frame_cache_hit_rate": total["frame_cache_hits"] / accesses if accesses else math.nan,
            "served_without_media_read_fraction": total["served_without_media_read"] / accesses if accesses
            else math.nan,
            "pe_cycles_per_block": max(p["pe_cycles_per_block"] for p in parts),
            "kv_pe_cycles_per_block": max(p["kv_pe_cycles_per_block"] for p in parts),
            "stall_s": max(p["stall_s"] for p in parts),
            "cooling_wait_s": max(p["cooling_wait_s"] for p in parts),
            "throttle_residency_s": parts[0]["throttle_residency_s"],
            "max_temperature_c": {k: max(p["max_temperature_c"][k] for p in parts)
                                  for k in parts[0]["max_temperature_c"]},
            "instances": len(parts),
            # Servers sharing one package's tier (duopd, sm-*): each one's traffic, summed over the instances.
            **({"servers": {role: {key: sum(p["servers"][role][key] for p in parts) for key in figures}
                            for role, figures in parts[0]["servers"].items()}} if "servers" in parts[0] else {})}


def _with_shared_prefix(requests: list[Request], tokens: int) -> list[Request]:
    """The prefix's KV is there from the start (computed once, like a loaded system prompt): each request
    prefills only the rest of its prompt, reading the prefix as already-cached context."""
    if tokens:
        shortest = min(r.input_len for r in requests)
        require(tokens < shortest, f"shared prefix of {tokens} tokens must be shorter than every prompt (the "
                                   f"shortest has {shortest})")
        for request in requests:
            request.prefilled = tokens
    return requests


# Beyond this span a double no longer resolves a nanosecond (ulp(1e7 s) = 1.9 ns).
MAX_SPAN_S = 1e7


def _counted(submit, total: int):
    """`submit`, counting each request on a progress bar (`.bar`), shown only when stderr is a terminal."""
    from tqdm import tqdm

    bar = tqdm(total=total, unit="request", desc="arrived", disable=None, file=sys.stderr)

    def counted(request: Request) -> None:
        bar.update()
        submit(request)

    counted.bar = bar
    return counted


def _from_first_arrival(requests: list[Request]) -> list[Request]:
    """The requests, with arrival times counted from the first one when they start beyond `MAX_SPAN_S`."""
    origin = min(r.arrival for r in requests)
    span = max(r.arrival for r in requests) - origin
    require(math.isfinite(origin) and span <= MAX_SPAN_S,
            f"arrivals span {span:.3g} s; at most {MAX_SPAN_S:.0e} s (116 days) keeps nanosecond time resolution")
    if origin > MAX_SPAN_S:
        for request in requests:
            request.arrival -= origin
    return requests


def _require_finite_times(requests: list[Request]) -> None:
    """Every request must finish at a finite time: a zero rate or an overflow is refused, not reported."""
    for r in requests:
        require(math.isfinite(r.first_token) and math.isfinite(r.finish),
                f"request {r.id} got no finite completion time: some rate in the hardware or model is effectively "
                f"zero or a cost overflowed")


def _require_finite_summary(summary: dict) -> None:
    """No aggregate may be infinite, and the ones every run defines must be numbers."""
    def walk(value, path: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, float) and math.isinf(value):
            raise ConfigError(f"the result {path} is {value}: some rate in the hardware or model is effectively zero")
    walk(summary, "")
    for key in ("makespan_s", "throughput", "ttft_s", "e2e_s", "energy_j"):
        value = summary[key]
        values = value.values() if isinstance(value, dict) else [value]
        require(all(not isinstance(v, float) or math.isfinite(v) for v in values),
                f"the result {key} is not a finite number")


def _plain(value):
    """Dataclass dicts with tuples and nested objects as JSON-friendly values."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)


def _base_die_power(setting: Setting) -> dict:
    """The power source of the run and, for the base-die logic it used (the PNM per stack, one DQB), the watts
    and the synthesized entries (or the paper's figure) they come from."""
    # A cached property is in the instance's __dict__ once the run has asked for it.
    used = {name: getattr(setting, name).as_dict() for name in ("pnm_power", "dqb_power") if name in vars(setting)}
    return {"source": setting.config.power_source, **used}


def _used_figures(setting: Setting) -> dict:
    """Provenance of the verified figures a run rests on: the PNM's lane, array, vector unit (and the adder that
    scales its reduction tree) and MMU on the systems that run one, the DQB's for quantized weights (and the base
    die's when its decode layer measured the S/Z share)."""
    used = []
    pnm = setting.spec.pnm_hardware(setting.hardware)
    if pnm is not None:
        lane, array = pnm_entries(setting.table, pnm.pnm)
        vector, adder = vector_entries(setting.table, pnm.pnm)
        used += [("pnm_lane", lane), ("pnm_array", array), ("pnm_vector", vector),
                 ("mmu", setting.table.entry("mmu", out_of_order=False))]
        used += [("fp32_add", adder)] if adder else []
    quant = setting.config.quantization
    if quant.quantized:  # the S/Z fraction always (the DQB's or the base die's), every DQB figure with the DQBs
        used.append(("dqb", dqb_entry(setting.table)))
        if sz_source(setting.table, quant.bits, quant.group_size)[1] == "base_die":
            used += [("base_die", entry) for entry in setting.table.entries if entry.block == "base_die"]
    return {name: {"params": e.params, "sources_digest": e.provenance["sources_digest"]} for name, e in used}
