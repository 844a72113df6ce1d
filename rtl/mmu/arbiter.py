"""The choice between the GPU and PNM request queues for the one memory-controller slot of a cycle (§4.3,
Fig. 9). Stateless except for the weighted-round-robin credit."""
from dataclasses import dataclass

from amaranth.hdl import Module, Mux, Signal, Value

from .config import Configuration
from .params import POLICIES, WEIGHT_WIDTH


@dataclass
class Grant:
    gpu: Signal
    pnm: Signal


def arbitrate(m: Module, config: Configuration, gpu_wants: Value, pnm_wants: Value, taken: Value) -> Grant:
    """Grant at most one requester; `taken` says the grant is used this cycle (it updates the WRR credit).

    prefill_first: the GPU whenever it wants, decode_first: the PNM whenever it wants. mixed: when both
    want, the favoured source is granted, and after `weight` grants in a row the other becomes favoured;
    a source that does not want cedes the slot without losing its turn (work conserving).
    """
    grant = Grant(gpu=Signal(name="grant_gpu"), pnm=Signal(name="grant_pnm"))
    favour_pnm = Signal(name="wrr_favour_pnm")
    credit = Signal(WEIGHT_WIDTH, name="wrr_credit")  # grants the favoured source has had in a row
    both = gpu_wants & pnm_wants
    policy = config.policy
    with m.If(policy == POLICIES.index("prefill_first")):
        m.d.comb += [grant.gpu.eq(gpu_wants), grant.pnm.eq(pnm_wants & ~gpu_wants)]
    with m.Elif(policy == POLICIES.index("decode_first")):
        m.d.comb += [grant.pnm.eq(pnm_wants), grant.gpu.eq(gpu_wants & ~pnm_wants)]
    with m.Else():  # mixed
        m.d.comb += [grant.gpu.eq(Mux(both, ~favour_pnm, gpu_wants)),
                     grant.pnm.eq(Mux(both, favour_pnm, pnm_wants))]
        weight = Mux(favour_pnm, config.weight_pnm, config.weight_gpu)
        favoured_granted = Mux(favour_pnm, grant.pnm, grant.gpu)
        with m.If(taken & favoured_granted):
            with m.If(credit + 1 >= weight):
                m.d.sync += [favour_pnm.eq(~favour_pnm), credit.eq(0)]
            with m.Else():
                m.d.sync += credit.eq(credit + 1)
    return grant
