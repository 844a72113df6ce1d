"""The base die of one pseudo-channel group (issue 31): the DuoPD PNM, whose MMU arbitrates the GPU's and the
PNM's requests onto one memory port, and StreamDQ's DQB on that port's read path, joined by the view port, so that
the GPU's and the PNM's reads of a quantized tensor's view both return FP16. docs/design/base-die.md."""
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..dqb.dqb import DQB
from ..dqb.ports import config_write
from ..pnm.top import PNM
from .params import BaseDieParams
from .ports import view_write
from .view_port import ViewPort

PNM_PORTS = ("write", "start", "status", "gpu_req", "gpu_resp", "config", "stray_response")


class BaseDie(wiring.Component):
    """Ports: the PNM's host (`write`, `start`, `status`), GPU (`gpu_req` → `gpu_resp`), MMU `config` and
    `stray_response`, as the PNM has them; `dqb_config` (the DQB's request-table writes) and `view_config` (the
    view table's), both always ready; the memory side `mc_req` → `mc_resp`, the DQB's (`kind` shows S/Z fills);
    `dq_error`, set until reset once a read was answered with the DQB's error bit (reserved tag, or a view whose
    weights no usable DQB entry holds: the data the MMU then receives are the DQB's, docs/design/dqb.md).

    Timing: `latency` is from `start` accepted to the first memory request on `mc_req` on an idle base die whose
    program starts with a LOAD: the PNM's, plus the DQB's lookup register (the view port adds no cycle);
    `initiation_interval`: one memory request per cycle on a LOAD of FP16 data or of a view's S/Z hits."""

    initiation_interval = 1

    def __init__(self, params: BaseDieParams = BaseDieParams()) -> None:
        self.params = p = params
        self._pnm, self._dqb = PNM(p.pnm_params()), DQB(p.dqb_params())
        self.latency = self._pnm.latency + 1
        super().__init__({
            **{name: self._pnm.signature.members[name] for name in PNM_PORTS},
            "dqb_config": In(stream.Signature(config_write(p.dqb_params()))),
            "view_config": In(stream.Signature(view_write(p))),
            "mc_req": self._dqb.signature.members["mc_req"],
            "mc_resp": self._dqb.signature.members["mc_resp"],
            "dq_error": Out(1),
        })

    @property
    def shared_modules(self) -> dict[str, wiring.Component]:
        return self._pnm.shared_modules

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.pnm = pnm = self._pnm
        m.submodules.dqb = dqb = self._dqb
        m.submodules.views = views = ViewPort(self.params)
        for name in ("write", "start", "gpu_req", "config"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(pnm, name))
        wiring.connect(m, pnm.gpu_resp, wiring.flipped(self.gpu_resp))
        m.d.comb += [self.status.eq(pnm.status), self.stray_response.eq(pnm.stray_response)]
        wiring.connect(m, pnm.mc_req, views.mmu_req)
        wiring.connect(m, views.mmu_resp, pnm.mc_resp)
        wiring.connect(m, views.dqb_req, dqb.gpu_req)
        wiring.connect(m, dqb.gpu_resp, views.dqb_resp)
        wiring.connect(m, wiring.flipped(self.view_config), views.config)
        wiring.connect(m, wiring.flipped(self.dqb_config), dqb.config)
        wiring.connect(m, dqb.mc_req, wiring.flipped(self.mc_req))
        wiring.connect(m, wiring.flipped(self.mc_resp), dqb.mc_resp)
        m.d.comb += [views.forget.eq(self.dqb_config.valid | self.view_config.valid), self.dq_error.eq(views.error)]
        return m
