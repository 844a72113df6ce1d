"""The choice between the GPU and PNM request queues for the one memory-controller slot of a cycle (§4.3,
Fig. 9), and the request register it loads."""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import configuration
from .params import POLICIES, WEIGHT_WIDTH, MMUParams
from .ports import tagged_request


class Arbiter(wiring.Component):
    """`gpu` and `pnm` requests in, one registered `request` out: the choice is registered, so the request holds
    still while the memory controller stalls. Stateless except for the weighted-round-robin credit.

    prefill_first: the GPU whenever it wants, decode_first: the PNM whenever it wants. mixed: when both
    want, the favoured source is granted, and after `weight` grants in a row the other becomes favoured;
    a source that does not want cedes the slot without losing its turn (work conserving).
    """

    def __init__(self, params: MMUParams) -> None:
        layout = tagged_request(params)
        super().__init__({"gpu": In(stream.Signature(layout)), "pnm": In(stream.Signature(layout)),
                          "request": Out(stream.Signature(layout)), "config": In(configuration(params))})

    def elaborate(self, platform) -> Module:
        m = Module()
        config, gpu_wants, pnm_wants = self.config, self.gpu.valid, self.pnm.valid
        load = ~self.request.valid | self.request.ready
        grant_gpu, grant_pnm = Signal(), Signal()
        favour_pnm = Signal(name="wrr_favour_pnm")
        credit = Signal(WEIGHT_WIDTH, name="wrr_credit")  # grants the favoured source has had in a row
        both = gpu_wants & pnm_wants
        with m.If(config.policy == POLICIES.index("prefill_first")):
            m.d.comb += [grant_gpu.eq(gpu_wants), grant_pnm.eq(pnm_wants & ~gpu_wants)]
        with m.Elif(config.policy == POLICIES.index("decode_first")):
            m.d.comb += [grant_pnm.eq(pnm_wants), grant_gpu.eq(gpu_wants & ~pnm_wants)]
        with m.Else():  # mixed
            m.d.comb += [grant_gpu.eq(Mux(both, ~favour_pnm, gpu_wants)),
                         grant_pnm.eq(Mux(both, favour_pnm, pnm_wants))]
            weight = Mux(favour_pnm, config.weight_pnm, config.weight_gpu)
            favoured_granted = Mux(favour_pnm, grant_pnm, grant_gpu)
            with m.If(load & favoured_granted):
                with m.If(credit + 1 >= weight):
                    m.d.sync += [favour_pnm.eq(~favour_pnm), credit.eq(0)]
                with m.Else():
                    m.d.sync += credit.eq(credit + 1)
        m.d.comb += [self.gpu.ready.eq(load & grant_gpu), self.pnm.ready.eq(load & grant_pnm)]
        with m.If(load):
            m.d.sync += self.request.valid.eq(grant_gpu | grant_pnm)
            with m.If(grant_gpu):
                m.d.sync += self.request.payload.eq(self.gpu.payload)
            with m.If(grant_pnm):
                m.d.sync += self.request.payload.eq(self.pnm.payload)
        return m
