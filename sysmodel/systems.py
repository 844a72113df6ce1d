"""The serving systems of the DuoPD study (paper §6.1, §6.5), each a wiring of servers on the hardware.

The registry `SYSTEMS` (every name, its spec and a line of help; a new system is a module and one registration):

- `duopd`: all 8 GPUs prefill in tensor parallel; all decoding runs on the PNMs of the same stacks, the two
  sharing each stack through the MMU's arbitration; the KV cache stays where prefill wrote it.
- `pd-1:1`, `pd-3:1`: PD disaggregation; prefill and decode instances on separate GPUs, the KV cache moved
  over NVLink layer by layer while prefill runs.
- `chunked`: one instance mixing prompt chunks (1K tokens dense, 4K MoE) with decoding.
- `sm-9:1`, `sm-7:3`, `sm-5:5`: one instance whose SMs are split between a prefill and a decode partition.
- `gpu`: one GPU serving with continuous batching (StreamDQ's setting, paper 002 §5.1).
- `duopd-4x-bw`, `duopd-4x-bw-4x-compute`: DuoPD with Duplex's 4× PNM read bandwidth, and 4× the lanes (§6.4);
  the PIM and Duplex baselines inside PD 1:1 are registered by `sysmodel.offload`.

Quantized weights (`SimulationConfig.quantization`) change every GPU executor (`gpu_execution`) and the memory the
weights take; the DQB adds its power to the GPUs'. A package layout that puts anything in HBF (`Setting.layout`)
gives each instance's package one `HBFTier`, and every server on it an executor that reads through it
(`_executor`).
"""
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import ClassVar

from .arbitration import MMUArbitration
from .base_die import StackDequant
from .engine import EventLoop, Request
from .errors import ConfigError, require
from .execution import GPUExecution, PNMExecution, PNMFigures, VectorFigures
from .hardware import DUPLEX_BANDWIDTH, DUPLEX_BANDWIDTH_COMPUTE, Hardware, PNMScale
from .hbf.layout import Layout
from .hbf.service import HBFPort, HBFTier, PortPower
from .llm import LLM
from .operators import Shard
from .quantized import GemmModel
from .quantized_execution import QuantizedGPUExecution, quantized_weight_bytes
from .perf import PerfModel, perf_model
from .power import BaseDiePower, dqb_power, pnm_power
from .registry import Registry
from .servers import Accounting, DecodeServer, KVPool, MixedServer, PrefillServer, SharedMemory
from basedie.verified import VerifiedBlocks


class System:
    """A serving system's spec (a frozen dataclass of its shape), registered under its name in `SYSTEMS`: a new
    system is one module with its spec and one `SYSTEMS.register` line. `options`: the configuration fields only
    some systems read (refused elsewhere); `prefill_batches`: the system's prefill servers batch whole prompts up to
    `chunk_tokens` (default one prompt), rather than splitting prompts into chunks of it (`Setting.chunk`)."""
    options: ClassVar[frozenset] = frozenset()
    prefill_batches: ClassVar[bool] = False

    def build(self, setting: "Setting", built: "ServingSystem") -> None:
        """Wire the system's servers on `setting` into `built` (its `submit` and accounts)."""
        raise NotImplementedError

    def pnm_hardware(self, hardware: Hardware) -> Hardware | None:
        """The machine whose PNMs the system decodes on (their verified figures are the run's), None: no PNM."""
        return None


@dataclass(frozen=True)
class Disaggregated(System):
    options: ClassVar[frozenset] = frozenset({"chunk_tokens"})
    prefill_batches: ClassVar[bool] = True
    prefill_instances: int
    prefill_tp: int
    decode_instances: int
    decode_tp: int

    def build(self, setting: "Setting", built: "ServingSystem") -> None:
        _disaggregated(self, setting, built)

    def decoder(self, setting: "Setting", built: "ServingSystem", shard: Shard, name: str):
        """A decode instance's executor, KV pool and busy power: its GPUs alone (`sysmodel.offload` moves
        operators to near-memory compute)."""
        power_w = shard.tp * setting.gpu_power_w
        return tiered_gpu_execution(setting, built, shard), kv_pool(setting, shard, name), power_w


@dataclass(frozen=True)
class SMPartition(System):
    options: ClassVar[frozenset] = frozenset({"chunk_tokens"})
    prefill_batches: ClassVar[bool] = True
    prefill_fraction: float

    def build(self, setting: "Setting", built: "ServingSystem") -> None:
        _sm_partition(self, setting, built)


@dataclass(frozen=True, repr=False)
class DuoPD(System):
    """`pnm` scales the hardware's PNM: DuoPD (4× BW) and (4× BW + 4× compute) of §6.4."""
    options: ClassVar[frozenset] = frozenset({"mmu_policy", "chunk_tokens"})
    prefill_batches: ClassVar[bool] = True
    pnm: PNMScale = PNMScale()

    def build(self, setting: "Setting", built: "ServingSystem") -> None:
        _duopd(self, setting, built)

    def pnm_hardware(self, hardware: Hardware) -> Hardware:
        return self.pnm.apply(hardware)

    def __repr__(self) -> str:      # the paper's DuoPD keeps its recorded spec, `DuoPD()`
        return "DuoPD()" if self.pnm == PNMScale() else f"DuoPD(pnm={self.pnm!r})"


@dataclass(frozen=True)
class Chunked(System):
    options: ClassVar[frozenset] = frozenset({"chunk_tokens"})

    def build(self, setting: "Setting", built: "ServingSystem") -> None:
        _chunked(self, setting, built)


@dataclass(frozen=True)
class SingleGPU(System):
    """One GPU mixing prompt chunks with continuous-batching decode (vLLM v1's scheduler, paper 002 §5.1)."""
    options: ClassVar[frozenset] = frozenset({"chunk_tokens"})

    def build(self, setting: "Setting", built: "ServingSystem") -> None:
        _chunked(self, setting, built, gpus=1)


# PD ratios count GPUs: 1:1 = one TP4 prefill instance + one TP4 decode instance; 3:1 = three TP2 prefill
# instances + one TP2 decode instance (6 + 2 GPUs, §6.2 "4:4 or 6:2"; TP2 because 64 heads do not split
# over 6 GPUs).
SYSTEMS: Registry[System] = Registry("system")
SYSTEMS.register("duopd", DuoPD(), "all GPUs prefill in TP; all decoding on the PNMs of their stacks (MMU arbitration)")
SYSTEMS.register("duopd-4x-bw", DuoPD(DUPLEX_BANDWIDTH), "duopd whose PNMs read at Duplex's 4x bandwidth (§6.4)")
SYSTEMS.register("duopd-4x-bw-4x-compute", DuoPD(DUPLEX_BANDWIDTH_COMPUTE),
                 "duopd whose PNMs read at 4x bandwidth with 4x the lanes (§6.4)")
SYSTEMS.register("pd-1:1", Disaggregated(1, 4, 1, 4), "PD disaggregation: one TP4 prefill + one TP4 decode instance")
SYSTEMS.register("pd-3:1", Disaggregated(3, 2, 1, 2), "PD disaggregation: three TP2 prefill + one TP2 decode instance")
SYSTEMS.register("chunked", Chunked(), "one instance mixing prompt chunks (1K dense, 4K MoE) with decoding")
SYSTEMS.register("sm-9:1", SMPartition(0.9), "one instance, 90 % of the SMs prefill, 10 % decode")
SYSTEMS.register("sm-7:3", SMPartition(0.7), "one instance, 70 % of the SMs prefill, 30 % decode")
SYSTEMS.register("sm-5:5", SMPartition(0.5), "one instance, SMs split evenly between prefill and decode")
SYSTEMS.register("gpu", SingleGPU(), "one GPU with chunked prefill and continuous batching (StreamDQ §5.1)")


def using(option: str) -> list[str]:
    """The registered systems that read the configuration field `option` (`chunk_tokens`, `mmu_policy`)."""
    return [name for name, spec in SYSTEMS.items() if option in spec.options]


@dataclass(frozen=True, kw_only=True)
class Setting:
    """Everything a system is built from: a configuration with its inputs resolved (`config.resolve`)."""
    config: "SimulationConfig"
    spec: System
    hardware: Hardware
    model: LLM
    table: VerifiedBlocks
    layout: Layout | None = None         # None: the hardware's own HBM package (docs/design/hbf.md)
    decode_hardware: Hardware | None = None   # PD only: the decode pool's machine (None: `hardware`)

    @property
    def perf(self) -> PerfModel:
        c = self.config
        return perf_model(c.perf_model, self.hardware.gpu, c.all_reduce, self.hardware.link, c.overlap)

    @property
    def chunk(self) -> int | None:
        """Prompt tokens per iteration: a chunking system's chunk (default 1K dense, 4K MoE), or a prefill
        server's budget of whole prompts (default None: one prompt per iteration, docs/design/pim-baselines.md)."""
        if self.spec.prefill_batches:
            return self.config.chunk_tokens
        return self.config.chunk_tokens or (4096 if self.model.moe else 1024)

    @cached_property
    def gemm(self) -> GemmModel:
        quant = self.config.quantization
        dqb_w = self.dqb_power.watts if quant.quantized and quant.dequant == "dqb" else None
        return GemmModel.build(self.hardware.gpu, quant, self.table, dqb_w)

    @cached_property
    def pnm_power(self) -> BaseDiePower:
        """One stack's PNM as the system builds it (Duplex's TSVs, 4x compute), from the run's power source
        (`sysmodel.power`; asked for only by systems with PNMs)."""
        return pnm_power(self.config.power_source, self.spec.pnm_hardware(self.hardware).pnm)

    @cached_property
    def dqb_power(self) -> BaseDiePower:
        """One DQB, from the run's power source (asked for only when DQBs dequantize)."""
        return dqb_power(self.config.power_source)

    def weight_bytes(self, shard: Shard) -> float:
        return quantized_weight_bytes(shard, self.gemm) if self.config.quantization.quantized else shard.weight_bytes

    @property
    def gpu_power_w(self) -> float:
        """One GPU's power while busy (with its stacks' DQBs when they dequantize)."""
        return self.gemm.power_w()


def gpu_execution(setting: Setting, shard: Shard, sm_fraction: float = 1.0):
    """The executor of GPUs holding `shard`: FP16 weights as ever, quantized ones through `sysmodel.quantized`."""
    overhead = setting.config.iteration_overhead_s
    if not setting.config.quantization.quantized:
        return GPUExecution(setting.hardware, shard, sm_fraction, setting.perf, overhead)
    c = setting.config
    require(c.perf_model == "roofline" and c.all_reduce == "bandwidth" and not c.overlap,
            f"quantized weights are priced by their own kernel model (sysmodel.quantized), not --perf-model "
            f"{c.perf_model}, --allreduce or --allreduce-overlap; use --perf-model roofline alone")
    if sm_fraction == 1.0:
        return QuantizedGPUExecution(setting.hardware, shard, setting.gemm, overhead)
    return QuantizedGPUExecution.partition(setting.hardware, shard, setting.gemm, sm_fraction, overhead)


def kv_pool(setting: Setting, shard: Shard, name: str) -> KVPool:
    """The KV-cache capacity of one instance: what its GPUs' memory holds beyond their weights (and the shared
    prefix, stored once); with the KV cache in HBF, what the HBF holds beyond the weights there."""
    capacity = setting.hardware.gpu.memory.capacity_bytes
    weights = setting.weight_bytes(shard)
    layout = setting.layout
    prefix = setting.config.shared_prefix_tokens * shard.kv_bytes_per_token
    in_hbm = prefix if layout is None or layout.prefix == "hbm" else 0.0
    if layout is not None:
        layout.check(shard, weights)
        weights = layout.hbm_resident_bytes(shard, weights)
    if weights + in_hbm >= capacity:
        raise ConfigError(f"{setting.model.name} does not fit on {name}: {weights / 1e9:.1f} GB of weights per GPU "
                          f"at TP={shard.tp} > {capacity / 1e9:.1f} GB of memory")
    if layout is not None and layout.kv == "hbf":
        capacity = layout.hbf_bytes - layout.hbf_weight_bytes(shard, setting.weight_bytes(shard)) - (prefix - in_hbm)
        require(capacity > 0, f"{setting.model.name}: layout {layout.name} leaves no HBF for the KV cache")
        return KVPool(int(capacity // shard.kv_bytes_per_token), name)
    return KVPool(int((capacity - weights - in_hbm) // shard.kv_bytes_per_token), name)


class ServingSystem:
    """A built system: `submit` requests, run the loop, read `accounts` and the requests."""

    def __init__(self, loop: EventLoop, name: str) -> None:
        self.loop, self.name = loop, name
        self.accounts: list[Accounting] = []
        self.finished: list[Request] = []
        self.submit: Callable[[Request], None] = lambda request: None
        self.hbf: list[HBFTier] = []

    def account(self, name: str, device: str, peak_flops: float, bandwidth: float, power_w: float,
                hbm_energy_per_byte: float) -> Accounting:
        accounting = Accounting(name, device, peak_flops, bandwidth, power_w, hbm_energy_per_byte)
        self.accounts.append(accounting)
        return accounting


def build(system: str, setting: Setting, loop: EventLoop, spec=None) -> ServingSystem:
    """The system named `system`: one of `SYSTEMS`, or any `spec` (a deployment) under that name."""
    spec = SYSTEMS.lookup(system) if spec is None else spec
    built = ServingSystem(loop, system)
    spec.build(setting, built)
    return built


# HBF (issue 14): with anything in HBF, each GPU instance's package is a stateful `HBFTier`, and the executor of
# every server on it runs behind its own port of that tier (one timeline for all of them).
def _in_hbf(setting: Setting) -> bool:
    return setting.layout is not None and setting.layout.uses_hbf


def _tier(setting: Setting, built: ServingSystem, shard: Shard) -> HBFTier | None:
    if not _in_hbf(setting):
        return None
    tier = HBFTier(built.loop, shard, setting.layout, setting.config.hbf, setting.config.shared_prefix_tokens,
                   weight_bytes=setting.weight_bytes(shard))
    built.hbf.append(tier)
    return tier


def _executor(tier: HBFTier | None, base, role: str, power: PortPower):
    """`base` itself, or its port on the package's HBF tier."""
    return base if tier is None else tier.port(base, role, power)


def attach(executor, server):
    """A port learns whose iterations it prices (and whose KV it reads and writes); returns the server."""
    if isinstance(executor, HBFPort):
        executor.server = server
    return server


def _gpu_power(setting: Setting, share: float = 1.0) -> PortPower:
    gpu = setting.hardware.gpu
    return PortPower((gpu.power_w * share, 0.0, 0.0), gpu.stack.energy_per_byte)


def tiered_gpu_execution(setting: Setting, built: ServingSystem, shard: Shard):
    """The executor of GPUs holding `shard`, through their own HBF tier when the layout puts anything there."""
    return _executor(_tier(setting, built, shard), gpu_execution(setting, shard), "gpu", _gpu_power(setting))


def _colocated(setting: Setting, built: ServingSystem, memory: SharedMemory, prefill, decode,
               prefill_account: Accounting, decode_account: Accounting, shard: Shard,
               powers: tuple[PortPower, PortPower], roles: tuple[str, str] = ("prefill", "decode")) -> None:
    """Prefill and decode servers on the same GPUs and stacks, sharing one KV pool (no handoff copy) and, with
    HBF, one tier; `prefill` and `decode` are their executors; `roles` are the names the memory's `Sharing`
    knows them by, `powers` what each draws on the package."""
    loop, kv = built.loop, kv_pool(setting, shard, f"{setting.hardware.gpus} GPUs")
    tier = _tier(setting, built, shard)
    prefill, decode = (_executor(tier, base, role, power)
                       for base, role, power in zip((prefill, decode), roles, powers))
    decoder = attach(decode, DecodeServer(loop, roles[1], decode.cost, decode_account, memory, kv=kv,
                                          max_batch=setting.config.max_batch, finished=built.finished.append,
                                          kv_reserved=True))
    prefiller = attach(prefill, PrefillServer(loop, roles[0], prefill.cost, prefill_account, memory, kv=kv,
                                              handoff=decoder.submit, token_budget=setting.chunk))
    built.submit = prefiller.submit


def _duopd(spec: DuoPD, setting: Setting, built: ServingSystem) -> None:
    hw = spec.pnm_hardware(setting.hardware)
    shard = Shard(setting.model, hw.gpus)
    quant = setting.config.quantization
    mmu = MMUArbitration.from_verified(setting.table, setting.config.mmu_policy, hw)
    # Quantized weights: the GPUs prefill through the chosen dequantization (`gpu_execution`); the PNMs decode
    # through their stacks' DQBs whatever the GPU uses (`sysmodel.base_die`).
    gpu = gpu_execution(setting, shard)
    dequant = (StackDequant.from_verified(setting.table, quant, hw.gpu, setting.dqb_power.watts) if quant.quantized
               else None)
    pnm = PNMExecution(hw, shard, PNMFigures.from_verified(setting.table, hw.pnm), mmu, setting.perf,
                       VectorFigures.from_verified(setting.table, hw.pnm), dequant)
    pnm_power_w = setting.pnm_power.watts + (dequant.power_w if dequant else 0.0)
    stacks = hw.gpus * hw.gpu.stacks
    e_hbm = hw.gpu.stack.energy_per_byte
    memory = hw.gpus * hw.gpu.memory.bandwidth
    # A PNM sits on an HBM stack's base die: its power heats the HBM dies, and it reads HBF data only from HBM
    # frames (misses filled from the media like the GPU's).
    _colocated(
        setting, built, SharedMemory(hw.gpu.memory.with_sharing(mmu)),
        prefill=gpu,
        decode=pnm,
        prefill_account=built.account("prefill (GPU)", "gpu", hw.gpus * hw.gpu.flops, memory,
                                      hw.gpus * setting.gpu_power_w, e_hbm),
        decode_account=built.account("decode (PNM)", "pnm", stacks * pnm.peak_flops, memory, stacks * pnm_power_w,
                                     e_hbm * (1 - hw.pnm_hbm_energy_saving)),
        shard=shard, roles=("gpu", "pnm"),
        powers=(_gpu_power(setting), PortPower((0.0, hw.gpu.stacks * pnm_power_w, 0.0),
                                               e_hbm * (1 - hw.pnm_hbm_energy_saving))))


def _sm_partition(spec: SMPartition, setting: Setting, built: ServingSystem) -> None:
    hw = setting.hardware
    shard = Shard(setting.model, hw.gpus)
    share = spec.prefill_fraction
    prefill, decode = gpu_execution(setting, shard, share), gpu_execution(setting, shard, 1 - share)
    # A partition draws the board's power (§6.7: 1,400 W while executing) in proportion to its SMs, so the two
    # busy together draw the whole board; like every device here, an idle partition draws nothing. No public
    # measurement splits a GPU's power by SM partition: this is the proportional assumption, stated.
    e_hbm, memory, flops = hw.gpu.stack.energy_per_byte, hw.gpus * hw.gpu.memory.bandwidth, hw.gpus * hw.gpu.flops
    _colocated(
        setting, built, SharedMemory(hw.gpu.memory),     # max-min fair sharing by default
        prefill=prefill,
        decode=decode,
        prefill_account=built.account("prefill SMs", "gpu", flops * share, memory, hw.gpus * hw.gpu.power_w * share,
                                      e_hbm),
        decode_account=built.account("decode SMs", "gpu", flops * (1 - share), memory,
                                     hw.gpus * hw.gpu.power_w * (1 - share), e_hbm),
        shard=shard, powers=(_gpu_power(setting, share), _gpu_power(setting, 1 - share)))


def _chunked(spec: Chunked | SingleGPU, setting: Setting, built: ServingSystem, gpus: int | None = None) -> None:
    hw = setting.hardware
    gpus = gpus or hw.gpus
    shard = Shard(setting.model, gpus)
    account = built.account("chunked prefill" if gpus > 1 else "GPU", "gpu", gpus * hw.gpu.flops,
                            gpus * hw.gpu.memory.bandwidth, gpus * setting.gpu_power_w, hw.gpu.stack.energy_per_byte)
    executor = tiered_gpu_execution(setting, built, shard)
    server = attach(executor, MixedServer(built.loop, "mixed", executor.cost, account,
                                          kv=kv_pool(setting, shard, f"{gpus} GPUs"),
                                          max_batch=setting.config.max_batch,
                                          chunk_tokens=setting.chunk, finished=built.finished.append))
    built.submit = server.submit


def _placement(spec: Disaggregated, hw: Hardware, decode_hw: Hardware) -> tuple[list[int], list[int]]:
    """The server each prefill and each decode instance runs on: instances fill servers of `gpus_per_server`
    GPUs in order (prefill first), none split over two; a decode pool on other hardware has servers of its own."""
    def place(pools: list[tuple[int, int]], machine: Hardware, first_server: int) -> list[int]:
        servers, gpu = [], 0
        for instances, tp in pools:
            require(tp <= machine.gpus_per_server,
                    f"an instance of TP{tp} does not fit in a server of {machine.gpus_per_server} GPUs")
            for _ in range(instances):
                if gpu % machine.gpus_per_server + tp > machine.gpus_per_server:
                    gpu += machine.gpus_per_server - gpu % machine.gpus_per_server
                servers.append(first_server + gpu // machine.gpus_per_server)
                gpu += tp
        require(gpu <= machine.gpus, f"the instances need {gpu} GPUs (none split over servers of "
                                     f"{machine.gpus_per_server}), the hardware has {machine.gpus}")
        return servers
    prefill = (spec.prefill_instances, spec.prefill_tp)
    decode = (spec.decode_instances, spec.decode_tp)
    if decode_hw is hw:
        servers = place([prefill, decode], hw, 0)
        return servers[:spec.prefill_instances], servers[spec.prefill_instances:]
    prefill_servers = place([prefill], hw, 0)
    return prefill_servers, place([decode], decode_hw, prefill_servers[-1] + 1)


def _disaggregated(spec: Disaggregated, setting: Setting, built: ServingSystem) -> None:
    """Prefill pool on `setting.hardware`, decode pool on `setting.decode_hardware` (or the same machine); the
    KV moves over the NVLink between instances on one server, over the network between servers."""
    hw, loop, model = setting.hardware, built.loop, setting.model
    decode_setting = replace(setting, hardware=setting.decode_hardware) if setting.decode_hardware else setting
    dhw = decode_setting.hardware
    used = spec.prefill_instances * spec.prefill_tp + spec.decode_instances * spec.decode_tp
    require(dhw is not hw or used <= hw.gpus, f"{built.name} needs {used} GPUs, the hardware has {hw.gpus}")
    prefill_servers, decode_servers = _placement(spec, hw, dhw)
    decode_shard = Shard(model, spec.decode_tp)
    decoders = []
    for index in range(spec.decode_instances):
        executor, kv, power_w = spec.decoder(decode_setting, built, decode_shard, f"decode instance {index}")
        decoders.append(attach(executor, DecodeServer(
            loop, f"decode{index}", executor.cost,
            built.account(f"decode instance {index} (TP{spec.decode_tp})", "gpu", spec.decode_tp * dhw.gpu.flops,
                          spec.decode_tp * dhw.gpu.memory.bandwidth, power_w, dhw.gpu.stack.energy_per_byte),
            kv=kv, max_batch=setting.config.max_batch,
            finished=built.finished.append)))
    prefill_shard = Shard(model, spec.prefill_tp)
    # KV moves from each prefill GPU to a decode GPU: as many links as the smaller side has GPUs, each the
    # NVLink on one server and the slower of the two ends' network adapters between servers.
    pairs = min(spec.prefill_tp, spec.decode_tp)
    network = min((m.network or m.link).bandwidth for m in (hw, dhw))
    link_free = [0.0]
    transfer_account = built.account("KV transfer (NVLink)", "link", 0.0, 0.0, 0.0, 0.0)

    def handoff(request: Request, pool: KVPool, server: int) -> None:
        # A shared prefix's KV is on every instance from the start: only the rest of the prompt's moves.
        kv_bytes = (request.input_len - setting.config.shared_prefix_tokens) * model.kv_bytes_per_token
        target = min(range(len(decoders)), key=lambda d: len(decoders[d].running) + len(decoders[d].waiting))
        transfer_s = kv_bytes / (pairs * (hw.link.bandwidth if decode_servers[target] == server else network))
        prefill_s = loop.now - request.prefill_start
        # Layer-wise: layer l's KV leaves once layer l is computed; the link is one FIFO resource.
        start = max(request.prefill_start + prefill_s / model.layers, link_free[0])
        done = max(start + transfer_s, loop.now + transfer_s / model.layers)
        link_free[0] = done
        transfer_account.link_bytes += kv_bytes
        transfer_account.busy_s += transfer_s
        # The prefill instance holds the KV until the decode instance admits the request.
        loop.at(done, lambda: decoders[target].submit(request, admitted=lambda: pool.release(request)))

    queue: deque[Request] = deque()
    prefillers = []
    for index in range(spec.prefill_instances):
        pool = kv_pool(setting, prefill_shard, f"prefill instance {index}")
        executor = tiered_gpu_execution(setting, built, prefill_shard)
        prefillers.append(attach(executor, PrefillServer(
            loop, f"prefill{index}", executor.cost,
            built.account(f"prefill instance {index} (TP{spec.prefill_tp})", "gpu", spec.prefill_tp * hw.gpu.flops,
                          spec.prefill_tp * hw.gpu.memory.bandwidth, spec.prefill_tp * setting.gpu_power_w,
                          hw.gpu.stack.energy_per_byte),
            kv=pool, handoff=lambda request, pool=pool, server=prefill_servers[index]: handoff(request, pool, server),
            queue=queue, token_budget=setting.chunk)))

    def submit(request: Request) -> None:
        for decoder in decoders:
            decoder.kv.check_fits(request)
        prefillers[0].kv.check_fits(request)
        queue.append(request)
        for server in prefillers:
            server.try_start()
    built.submit = submit
