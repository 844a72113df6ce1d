"""Deployments as options, not names: disaggregated pools of any size and TP (`pd:PxT+DxU`), and colocated
instances behind a router (`colocated:NxT:SCHEDULER:ROUTER`), on top of the named systems of `systems`.

- `pd:2x4+1x4`: 2 prefill instances of TP 4 and 1 decode instance of TP 4 (the `pd-1:1` / `pd-3:1` wiring).
- `colocated:4x2:sarathi:least-tokens`: 4 instances of TP 2, each prefilling and decoding, batched by a scheduler
  of `SCHEDULERS`, requests spread by a router of `ROUTERS` (each one registration line).
"""
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from typing import ClassVar

from . import offload  # noqa: F401  (registers the Fig. 13 PIM and Duplex systems in SYSTEMS)
from .engine import Request
from .errors import ConfigError, require
from .operators import Shard
from .registry import Registry
from .servers import MixedServer
from .systems import (SYSTEMS, Disaggregated, ServingSystem, Setting, System, attach, kv_pool,
                      tiered_gpu_execution)


@dataclass(frozen=True)
class Scheduler:
    """How a colocated instance batches: `whole_prompts` prefills whole prompts up to the token budget (else
    `chunk_tokens` per iteration); `mixed` puts prompts and decoding in one batch."""
    whole_prompts: bool
    mixed: bool


SCHEDULERS: Registry[Scheduler] = Registry("scheduler")
SCHEDULERS.register("sarathi", Scheduler(whole_prompts=False, mixed=True),
                    "chunked prefill: `chunk_tokens` prompt tokens per iteration, mixed with decoding")
SCHEDULERS.register("vllm", Scheduler(whole_prompts=True, mixed=False),
                    "whole prompts up to the token budget first, no mixed batches")
SCHEDULERS.register("orca", Scheduler(whole_prompts=True, mixed=True), "whole prompts, mixed with decoding")

# A router picks the instance of a new request from the tokens each has still to produce and the request's turn.
Router = Callable[[list[int], int], int]
ROUTERS: Registry[Router] = Registry("router")
ROUTERS.register("round-robin", lambda outstanding, turn: turn % len(outstanding), "instances in turn")
ROUTERS.register("least-tokens", lambda outstanding, turn: min(range(len(outstanding)),
                                                               key=lambda i: (outstanding[i], i)),
                 "the instance with the fewest prompt + output tokens still to produce")


@dataclass(frozen=True)
class Colocated(System):
    instances: int
    tp: int
    scheduler: str = "sarathi"
    router: str = "round-robin"
    options: ClassVar[frozenset] = frozenset({"chunk_tokens"})

    def __post_init__(self) -> None:
        require(self.instances >= 1 and self.tp >= 1, "colocated: instances and TP must be >= 1")
        SCHEDULERS.lookup(self.scheduler)
        ROUTERS.lookup(self.router)

    def build(self, setting: Setting, built: ServingSystem) -> None:
        _colocated_instances(self, setting, built)


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


def _colocated_instances(spec: Colocated, setting: Setting, built: ServingSystem) -> None:
    hw, loop = setting.hardware, built.loop
    require(spec.instances * spec.tp <= hw.gpus,
            f"{built.name} needs {spec.instances * spec.tp} GPUs, the hardware has {hw.gpus}")
    shard, scheduler, router = Shard(setting.model, spec.tp), SCHEDULERS[spec.scheduler], ROUTERS[spec.router]
    outstanding = [0] * spec.instances          # prompt + output tokens routed and not yet finished

    def finisher(index: int):
        def finished(request: Request) -> None:
            outstanding[index] -= request.input_len + request.output_len
            built.finished.append(request)
        return finished

    def instance(i: int) -> MixedServer:
        """Instance `i` on its GPUs, through their own HBF tier when the layout puts anything there."""
        executor = tiered_gpu_execution(setting, built, shard)
        return attach(executor, MixedServer(
            loop, f"instance{i}", executor.cost,
            built.account(f"instance {i} (TP{spec.tp}, {spec.scheduler})", "gpu", spec.tp * hw.gpu.flops,
                          spec.tp * hw.gpu.memory.bandwidth, spec.tp * setting.gpu_power_w,
                          hw.gpu.stack.energy_per_byte),
            kv=kv_pool(setting, shard, f"instance {i}"), max_batch=setting.config.max_batch,
            chunk_tokens=setting.chunk, finished=finisher(i), whole_prompts=scheduler.whole_prompts,
            mixed=scheduler.mixed))
    servers = [instance(i) for i in range(spec.instances)]
    turns = count()

    def submit(request: Request) -> None:
        index = router(outstanding, next(turns))
        outstanding[index] += request.input_len + request.output_len
        servers[index].submit(request)
    built.submit = submit
