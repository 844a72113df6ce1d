"""Run-time configuration registers (policy, WRR weights, memory size, protected regions) and their port."""
from dataclasses import dataclass

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring

from .params import (
    POLICIES,
    REG_MEMORY_SIZE,
    REG_POLICY,
    REG_REGION_BASE,
    REG_REGION_LIMIT,
    REG_WEIGHT_GPU,
    REG_WEIGHT_PNM,
    WEIGHT_WIDTH,
    MMUParams,
)


@dataclass
class Configuration:
    policy: Signal
    weight_gpu: Signal
    weight_pnm: Signal
    memory_size: Signal
    region_base: list[Signal]
    region_limit: list[Signal]


def configuration(m: Module, p: MMUParams, port: wiring.PureInterface) -> Configuration:
    """Registers written through the always-ready `port`; reset values are the parameters' (no protected
    region, the whole address space configured). Invalid values and unknown registers are ignored, so a
    bad write can never leave the arbiter without a policy or a weight."""
    reset_weights = {"gpu": p.wrr_weight_gpu, "pnm": p.wrr_weight_pnm}
    config = Configuration(
        policy=Signal(range(len(POLICIES)), init=POLICIES.index(p.policy), name="config_policy"),
        weight_gpu=Signal(WEIGHT_WIDTH, init=reset_weights["gpu"], name="config_weight_gpu"),
        weight_pnm=Signal(WEIGHT_WIDTH, init=reset_weights["pnm"], name="config_weight_pnm"),
        memory_size=Signal(p.address_bits + 1, init=2 ** p.address_bits, name="config_memory_size"),
        region_base=[Signal(p.address_bits + 1, name=f"config_region{i}_base") for i in range(p.protected_regions)],
        region_limit=[Signal(p.address_bits + 1, name=f"config_region{i}_limit") for i in range(p.protected_regions)],
    )
    value = port.payload.value
    m.d.comb += port.ready.eq(1)
    written = {REG_POLICY: (config.policy, value < len(POLICIES)),
               REG_WEIGHT_GPU: (config.weight_gpu, (value != 0) & (value < 2 ** WEIGHT_WIDTH)),
               REG_WEIGHT_PNM: (config.weight_pnm, (value != 0) & (value < 2 ** WEIGHT_WIDTH)),
               REG_MEMORY_SIZE: (config.memory_size, 1)}
    for i in range(p.protected_regions):
        written[REG_REGION_BASE + 2 * i] = (config.region_base[i], 1)
        written[REG_REGION_LIMIT + 2 * i] = (config.region_limit[i], 1)
    for number, (register, acceptable) in written.items():
        with m.If(port.valid & (port.payload.reg == number) & acceptable):
            m.d.sync += register.eq(value)
    return config
