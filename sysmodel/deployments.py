"""Deployments as options, not names: disaggregated pools of any size and TP (`pd:PxT+DxU`), and colocated
instances behind a router (`colocated:NxT:SCHEDULER:ROUTER`), on top of the named systems of `systems`.

- `pd:2x4+1x4`: 2 prefill instances of TP 4 and 1 decode instance of TP 4 (the `pd-1:1` / `pd-3:1` wiring).
- `colocated:4x2:sarathi:least-tokens`: 4 instances of TP 2, each prefilling and decoding; schedulers
  `sarathi` (chunked prefill, `chunk_tokens` prompt tokens per iteration, mixed with decoding), `vllm`
  (whole prompts up to the token budget first, no mixed batches), `orca` (whole prompts, mixed); routers
  `round-robin` and `least-tokens` (the instance with the fewest prompt + output tokens still to produce).
"""
import re
from dataclasses import dataclass
from itertools import count

from .engine import EventLoop, Request
from .errors import ConfigError, require
from .operators import Shard
from .servers import MixedServer
from .systems import SYSTEMS, Disaggregated, ServingSystem, Setting, build as build_named, gpu_execution, kv_pool

SCHEDULERS = {"sarathi": (False, True), "vllm": (True, False), "orca": (True, True)}   # whole prompts, mixed
ROUTERS = ("round-robin", "least-tokens")


@dataclass(frozen=True)
class Colocated:
    instances: int
    tp: int
    scheduler: str = "sarathi"
    router: str = "round-robin"

    def __post_init__(self) -> None:
        require(self.instances >= 1 and self.tp >= 1, "colocated: instances and TP must be >= 1")
        require(self.scheduler in SCHEDULERS,
                f"unknown scheduler {self.scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
        require(self.router in ROUTERS, f"unknown router {self.router!r}; choose one of {', '.join(ROUTERS)}")


PD = re.compile(r"pd:(\d+)x(\d+)\+(\d+)x(\d+)")
COLOCATED = re.compile(r"colocated:(\d+)x(\d+)(?::([a-z]+))?(?::([a-z-]+))?")


def parse(system: str) -> Disaggregated | Colocated:
    """The spec a system name stands for: a named system, `pd:PxT+DxU` or `colocated:NxT[:SCHED[:ROUTER]]`."""
    if system in SYSTEMS:
        return SYSTEMS[system]
    if match := PD.fullmatch(system):
        numbers = [int(g) for g in match.groups()]
        require(min(numbers) >= 1, f"{system}: instance counts and TP degrees must be >= 1")
        return Disaggregated(*numbers)
    if match := COLOCATED.fullmatch(system):
        instances, tp, scheduler, router = match.groups()
        return Colocated(int(instances), int(tp), scheduler or "sarathi", router or "round-robin")
    raise ConfigError(f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}, pd:PxT+DxU "
                      f"(e.g. pd:2x4+1x4) or colocated:NxT[:{'|'.join(SCHEDULERS)}[:{'|'.join(ROUTERS)}]]")


def build(system: str, setting: Setting, loop: EventLoop) -> ServingSystem:
    spec = parse(system)
    if not isinstance(spec, Colocated):
        return build_named(system, setting, loop, spec)
    require(setting.layout is None or setting.layout.weights != "hbf",
            f"weights in HBF are not modelled for colocated deployments ({system})")
    built = ServingSystem(loop, system)
    _colocated_instances(spec, setting, built)
    return built


def _colocated_instances(spec: Colocated, setting: Setting, built: ServingSystem) -> None:
    hw, loop = setting.hardware, built.loop
    require(spec.instances * spec.tp <= hw.gpus,
            f"{built.name} needs {spec.instances * spec.tp} GPUs, the hardware has {hw.gpus}")
    shard, whole, mixed = Shard(setting.model, spec.tp), *SCHEDULERS[spec.scheduler]
    cost = gpu_execution(setting, shard).cost
    outstanding = [0] * spec.instances          # prompt + output tokens routed and not yet finished

    def finisher(index: int):
        def finished(request: Request) -> None:
            outstanding[index] -= request.input_len + request.output_len
            built.finished.append(request)
        return finished

    servers = [MixedServer(
        loop, f"instance{i}", cost,
        built.account(f"instance {i} (TP{spec.tp}, {spec.scheduler})", "gpu", spec.tp * hw.gpu.flops,
                      spec.tp * hw.gpu.memory.bandwidth, spec.tp * setting.gpu_power_w, hw.gpu.stack.energy_per_byte),
        kv=kv_pool(setting, shard, f"instance {i}"), max_batch=setting.max_batch, chunk_tokens=setting.chunk,
        finished=finisher(i), whole_prompts=whole, mixed=mixed) for i in range(spec.instances)]
    turns = count()

    def submit(request: Request) -> None:
        if spec.router == "round-robin":
            index = next(turns) % spec.instances
        else:
            index = min(range(spec.instances), key=lambda i: (outstanding[i], i))
        outstanding[index] += request.input_len + request.output_len
        servers[index].submit(request)
    built.submit = submit
