"""A toy block, added the way any block is: one module holding its component and its bench, and one registration
line. A one-stage register between two 8-bit streams (a skid-less pipeline register: it takes a beat whenever its
output is empty or being taken)."""
import random

import cocotb
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.params import NoParams
from rtl.registry import Bench, Block, register
from tb import bench


class Toy(wiring.Component):
    latency = 1
    initiation_interval = 1
    i: In(stream.Signature(8))
    o: Out(stream.Signature(8))

    def __init__(self, params: NoParams) -> None:
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.i.ready.eq(self.o.ready | ~self.o.valid)
        with m.If(self.i.ready):
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload)]
        return m


@cocotb.test()
async def every_beat_in_order_under_back_pressure(dut):
    await bench.start(dut)
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    rng = random.Random(1)
    src.set_pause_generator(bench.random_pauses(rng, 0.3))
    snk.set_pause_generator(bench.random_pauses(rng, 0.3))
    payloads = [rng.randrange(256) for _ in range(200)]
    cocotb.start_soon(bench.send_all(src, payloads))
    assert await bench.receive(snk, len(payloads)) == payloads
    bench.record(vectors_checked=len(payloads))


register(Block("toy", NoParams, Toy, "a one-stage register stream (a test's toy)", Bench("tests.rtl.toy_block")))
