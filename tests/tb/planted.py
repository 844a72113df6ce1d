"""Planted faults for bench tests: a block whose datapath is slower than the real one."""
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from rtl.registry import BLOCKS, Block


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
    return Block(block.name, block.params, lambda params: Throttled(block.component(params), port), block.summary)
