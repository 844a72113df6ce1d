"""Parts every formal harness uses: a property's record, the clock without reset, the stream rules as a
checkable expression, a view into the elaborated design's hierarchy, and the free inputs."""
from collections.abc import Callable
from dataclasses import dataclass

from amaranth.asserts import AnySeq
from amaranth.hdl import Assume, Elaboratable, Fragment, Module, ResetSignal, Signal, Value
from amaranth.lib import wiring


@dataclass(frozen=True)
class Property:
    """A property of a block: `check(m, harness)` adds its assertions (its docstring says it in words),
    `harness_of(variant, check)` builds the block in its environment for one variant (a parameter set)."""
    name: str
    check: Callable
    harness_of: Callable[[str, Callable], Elaboratable]
    variants: tuple[str, ...]
    depth: int
    """Steps `basedie prove` checks by default (basecase depth and longest induction tried): deeper than the step
    at which the property's planted bug (tests/rtl/test_formal_*.py) shows, as deep as minutes of solver allow."""

    def harness(self, variant: str) -> Elaboratable:
        return self.harness_of(variant, self.check)


def clocked(m: Module) -> None:
    """One clock, reset held low: every check starts in the reset state (the initial values) and runs on. The
    domain is left for the converter to create, so its clock is a port the solver steps (a clock defined here
    and driven by nothing would be tied to 0, and Yosys would freeze every register)."""
    m.d.comb += Assume(~ResetSignal())


def held(m: Module, stream, name: str) -> Value:
    """High unless `stream` broke the rule of `lib.stream`: a beat offered and not taken is offered again in the
    next cycle, unchanged (valid stays high and the payload holds)."""
    payload = Value.cast(stream.payload)
    stalled = Signal(name=f"{name}_stalled")
    last = Signal(len(payload), name=f"{name}_last_payload")
    m.d.sync += [stalled.eq(stream.valid & ~stream.ready), last.eq(payload)]
    return ~stalled | (stream.valid & (payload == last))


def free(m: Module, *signals) -> None:
    """Drive each signal with a value the solver chooses anew every cycle."""
    for signal in signals:
        value = Value.cast(signal)
        m.d.comb += value.eq(AnySeq(len(value)))


class Internals:
    """The elaborated hierarchy of a component, to observe what its ports do not show (a FIFO's full flag, the
    round-robin credit). `fragment` goes into the harness as the component itself."""

    def __init__(self, component: wiring.Component, platform=None) -> None:
        self.fragment = Fragment.get(component, platform)

    def _fragment(self, path: tuple[str, ...]) -> Fragment:
        fragment = self.fragment
        for name in path:
            found = [sub for sub, sub_name, _ in fragment.subfragments if sub_name == name]
            if not found:
                raise KeyError(f"no submodule {'.'.join(path)}")
            fragment = found[0]
        return fragment

    def part(self, *path: str):
        """The elaboratable (a component, a FIFO) at `path` of submodule names."""
        return self._fragment(path).origins[0]

    def signal(self, *path: str, name: str) -> Signal:
        """The signal called `name` that the statements of the submodule at `path` use."""
        fragment = self._fragment(path)
        found = {id(signal): signal for statements in fragment.statements.values() for statement in statements
                 for signal in (*statement._lhs_signals(), *statement._rhs_signals()) if signal.name == name}
        if len(found) != 1:
            raise KeyError(f"{len(found)} signals named {name!r} in {'.'.join(path)}")
        return found.popitem()[1]
