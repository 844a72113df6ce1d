"""The DQB top (StreamDQ §3.2, Figure 5): one per HBM pseudo-channel, on the memory controller's read path."""
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .params import DQBParams
from .ports import config_write, gpu_request, gpu_response, history_entry, mc_request, mc_response
from .processing import DataProcessing
from .sz_requests import SZRequestGenerator


class DQB(wiring.Component):
    """GPU requests in, memory-controller requests out; memory data in, GPU responses out.

    Ports (all `lib.stream`): `gpu_req` {address, tag, is_write, mask, data}; `config` {index, weight_base,
    weight_size, scale_base, zero_base, log2_group_width, enable, last} (always ready; an update is its beats up
    to one with `last`, and no GPU request is taken while it is half written); `mc_req` {address, is_write,
    kind, mask, data} with `kind` GPU/SCALE/ZERO; `mc_resp` {data}, one per request (a store's is its
    acknowledgement), in request order; `gpu_resp` {data, error, is_write}, in GPU-request order. A read returns
    1 beat (bypass, reserved tag) or 16/bits beats (dequantized); a store writes the bytes its `mask` selects
    and returns one acknowledgement beat (`is_write`, data 0) once the memory has answered it, so every read
    sent after the acknowledgement sees the store. Reserved tag 111: the data unchanged with `error`. A tagged
    read outside every usable layer entry: 16/bits beats of zeros with `error`. Reset empties every queue, the
    request table and the S/Z buffer. Timing depends on the traffic; `latency` is the unloaded minimum for a
    dequantized read: the cycles from its data accepted on `mc_resp` to its first beat on `gpu_resp`;
    `bypass_latency` the same for a one-beat pass-through response (bypass, reserved tag, acknowledgement) that
    finds the datapath empty (behind a dequantized read it takes `latency`). `initiation_interval`: one response
    beat per cycle.
    """

    latency = DataProcessing.latency
    bypass_latency = DataProcessing.bypass_latency
    initiation_interval = 1

    def __init__(self, params: DQBParams = DQBParams()) -> None:
        self.params = p = params
        super().__init__({
            "gpu_req": In(stream.Signature(gpu_request(p))),
            "config": In(stream.Signature(config_write(p))),
            "mc_req": Out(stream.Signature(mc_request(p))),
            "mc_resp": In(stream.Signature(mc_response(p))),
            "gpu_resp": Out(stream.Signature(gpu_response(p))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        m.submodules.requests = requests = SZRequestGenerator(p)
        # Tag history buffer (§3.4): every outstanding memory read in request order, with what its data is for.
        # Its depth, `outstanding_reads`, is our choice (the paper states none).
        m.submodules.tag_history = history = SyncFIFO(width=history_entry(p).size, depth=p.outstanding_reads)
        m.submodules.processing = processing = DataProcessing(p)
        wiring.connect(m, wiring.flipped(self.gpu_req), requests.gpu_req)
        wiring.connect(m, wiring.flipped(self.config), requests.config)
        wiring.connect(m, requests.mc_req, wiring.flipped(self.mc_req))
        wiring.connect(m, requests.history, history.w_stream)
        wiring.connect(m, history.r_stream, processing.history)
        wiring.connect(m, wiring.flipped(self.mc_resp), processing.mc_resp)
        wiring.connect(m, processing.gpu_resp, wiring.flipped(self.gpu_resp))
        return m
