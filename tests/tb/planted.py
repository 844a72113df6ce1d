"""Planted faults for bench tests: a block whose datapath is slower than the real one, or one that takes beats
it cannot hold; and which of a bench's cocotb tests failed on one.

Planted bugs run under Icarus: it compiles a variant in seconds where Verilator takes half a minute to minutes
per variant, and a bench that fails stops its test at the first wrong beat. (Icarus runs a shorter stimulus in
the FP and vector-unit benches and the MMU's grid: a planted bug must show within it.)"""
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from rtl.params import Params
from rtl.registry import BLOCKS, Block
from basedie.flow.runner import BenchFailed, icarus_missing, run_bench

needs_icarus = pytest.mark.skipif(icarus_missing() is not None, reason=icarus_missing() or "")


def failed_tests(block_name: str, module: str, params: Params, runs) -> set[str]:
    """Run the bench on the (mutated) block under Icarus in the empty folder `runs` and return the names of the
    cocotb tests that failed (at least one must)."""
    # Under pytest cocotb's runner exits on failing tests; elsewhere ours raises BenchFailed.
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench(block_name, module, params, runs=runs, simulator="icarus")
    results = ET.parse(next(runs.glob("*/results.xml")))
    return {case.get("name") for case in results.iter("testcase") if case.find("failure") is not None}


class Throttled(wiring.Component):
    """`inner` with the same ports, except that stream port `port` transfers only every other cycle (valid
    and ready both gated by a toggling enable): a datapath with half the throughput and the same latency."""

    def __init__(self, inner: wiring.Component, port: str) -> None:
        self.inner, self.port = inner, port
        self.shared_modules = getattr(inner, "shared_modules", {})   # modules `inner` instantiates by name
        super().__init__(dict(inner.signature.members.items()))

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.inner = self.inner
        enable = Signal()
        m.d.sync += enable.eq(~enable)
        pairs = zip(self.signature.flatten(self), self.inner.signature.flatten(self.inner), strict=True)
        for (path, member, outer), (_, _, inner) in pairs:
            source, target = (outer, inner) if member.flow == In else (inner, outer)
            gated = path[0] == self.port and path[-1] in ("valid", "ready")
            m.d.comb += target.eq(source & enable if gated else source)
        return m


def throttled(block_name: str, port: str) -> Block:
    """A registry entry building `block_name` with `port` throttled (for `monkeypatch.setitem(BLOCKS, ...)`)."""
    block = BLOCKS[block_name]
    return replace(block, component=lambda params: Throttled(block.component(params), port))


class AlwaysReady(wiring.Component):
    """`inner` with the same ports, except that stream port `port` is always ready: a beat `inner` was not ready
    for is taken and lost (a write dropped when it loses a conflict, say)."""

    def __init__(self, inner: wiring.Component, port: str) -> None:
        self.inner, self.port = inner, port
        super().__init__(dict(inner.signature.members.items()))

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.inner = self.inner
        pairs = zip(self.signature.flatten(self), self.inner.signature.flatten(self.inner), strict=True)
        for (path, member, outer), (_, _, inner) in pairs:
            source, target = (outer, inner) if member.flow == In else (inner, outer)
            m.d.comb += target.eq(1 if path[0] == self.port and path[-1] == "ready" else source)
        return m


def always_ready(block_name: str, port: str) -> Block:
    """A registry entry building `block_name` with `port` always ready."""
    block = BLOCKS[block_name]
    return replace(block, component=lambda params: AlwaysReady(block.component(params), port))
