"""Run-time configuration registers (policy, WRR weights, memory size, protected regions) and their port."""
from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

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
from .ports import config_write


def configuration(params: MMUParams) -> wiring.Signature:
    """The registers' values as the arbiter and the load-store unit read them; reset values are the parameters'
    (no protected region, the whole address space configured)."""
    p, address = params, params.address_bits + 1
    return wiring.Signature({
        "policy": Out(range(len(POLICIES)), init=POLICIES.index(p.policy)),
        "weight_gpu": Out(WEIGHT_WIDTH, init=p.wrr_weight_gpu),
        "weight_pnm": Out(WEIGHT_WIDTH, init=p.wrr_weight_pnm),
        "memory_size": Out(address, init=2 ** p.address_bits),
        "region_base": Out(data.ArrayLayout(address, p.protected_regions)),
        "region_limit": Out(data.ArrayLayout(address, p.protected_regions)),
    })


class ConfigRegisters(wiring.Component):
    """Registers written through the always-ready `write` port, read on `values`. Invalid values and unknown
    registers are ignored, so a bad write can never leave the arbiter without a policy or a weight."""

    def __init__(self, params: MMUParams) -> None:
        self.params = params
        super().__init__({"write": In(stream.Signature(config_write(params))), "values": Out(configuration(params))})

    def elaborate(self, platform) -> Module:
        m = Module()
        values, value = self.values, self.write.payload.value
        m.d.comb += self.write.ready.eq(1)
        written = {REG_POLICY: (values.policy, value < len(POLICIES)),
                   REG_WEIGHT_GPU: (values.weight_gpu, (value != 0) & (value < 2 ** WEIGHT_WIDTH)),
                   REG_WEIGHT_PNM: (values.weight_pnm, (value != 0) & (value < 2 ** WEIGHT_WIDTH)),
                   # Above the address space a tensor's requests would wrap to address 0, past the protection
                   # check (found by the formal proof protected_store, docs/formal.md).
                   REG_MEMORY_SIZE: (values.memory_size, value <= 2 ** self.params.address_bits)}
        for i in range(self.params.protected_regions):
            written[REG_REGION_BASE + 2 * i] = (values.region_base[i], 1)
            written[REG_REGION_LIMIT + 2 * i] = (values.region_limit[i], 1)
        for number, (register, acceptable) in written.items():
            with m.If(self.write.valid & (self.write.payload.reg == number) & acceptable):
                m.d.sync += register.eq(value)
        return m
