"""Fixed-latency datapaths behind stream ports (II = 1), and the stage registers they are built from."""
from types import SimpleNamespace

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Shape, Signal, Value, ValueCastable
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class Stages:
    """Pipeline registers that all advance on one enable.

    Each call is one stage boundary: it registers the named values and returns the registers, so a
    datapath reads as a sequence of stages and its depth is the number of calls. Parallel datapaths (the
    lanes of a SIMD unit) each take a `fork`, which starts at the current boundary.
    """

    def __init__(self, m: Module, advance: Value, start: int = 0) -> None:
        self.m = m
        self.advance = advance
        self.count = start
        self._forks: list[Stages] = []

    def fork(self) -> "Stages":
        """Stages for one of several parallel datapaths that begin at this boundary."""
        child = Stages(self.m, self.advance, self.count)
        self._forks.append(child)
        return child

    @property
    def depth(self) -> int:
        """Register stages from the input to the deepest output; parallel forks must agree."""
        depths = {fork.depth for fork in self._forks}
        if len(depths) > 1:
            raise ValueError(f"parallel datapaths of unequal depth {sorted(depths)} would misalign")
        return max([self.count, *depths])

    def require_depth(self, stated: int, owner: object) -> None:
        """Refuse a datapath whose register stages differ from the latency `owner` states for it."""
        if self.depth != stated:
            raise AssertionError(f"{type(owner).__name__} states latency {stated} "
                                 f"but its datapath has {self.depth} stages")

    def nets(self, **values: Value | int) -> SimpleNamespace:
        """Name combinational values that are read more than once, without a register.

        Amaranth emits an expression again at every use, so a shared sub-expression (a leading-zero count
        feeding a shift and an exponent) would be duplicated in the Verilog, and in trees exponentially.
        """
        return _named_wires(self.m, f"c{self.count}", values)

    def __call__(self, **values: Value | int) -> SimpleNamespace:
        self.count += 1
        registers = {}
        with self.m.If(self.advance):
            for name, value in values.items():
                value = Value.cast(value)
                register = Signal(value.shape(), name=f"s{self.count}_{name}")
                self.m.d.sync += register.eq(value)
                registers[name] = register
        return SimpleNamespace(**registers)


class Wires:
    """The `Stages` interface with wires instead of registers: a datapath written for `Stages` (an
    `fp32_add`) evaluated within one cycle, where a loop must close every cycle (an accumulator at II = 1)."""

    def __init__(self, m: Module, name: str) -> None:
        self.m, self.name, self.count = m, name, 0

    def __call__(self, **values: Value | int) -> SimpleNamespace:
        self.count += 1
        return _named_wires(self.m, f"{self.name}_w{self.count}", values)

    def nets(self, **values: Value | int) -> SimpleNamespace:
        return _named_wires(self.m, f"{self.name}_c{self.count}", values)


def _named_wires(m: Module, prefix: str, values: dict[str, Value | int]) -> SimpleNamespace:
    wires = {}
    for name, value in values.items():
        value = Value.cast(value)
        wires[name] = Signal(value.shape(), name=f"{prefix}_{name}")
        m.d.comb += wires[name].eq(value)
    return SimpleNamespace(**wires)


class SharedDatapath(wiring.Component):
    """A two-operand datapath written for `Stages` (an `fp32_add`, an `fp16_mul_fp32`) as a module of its own.

    A block that uses one datapath many times lists it in its `shared_modules` (name → `SharedDatapath`) and
    places `SharedDatapath.instance`s of it by that name: Amaranth elaborates and Yosys writes the module once
    rather than once per use, and Verilator compiles it once (what keeps the PNM's 1,024-wide lane and the
    vector unit's 45 units per lane buildable). Its ports: `advance` (every stage's enable), `a`, `b`, `result`.
    """

    def __init__(self, datapath, operand_width: int, result_width: int, stages: int) -> None:
        self._datapath, self._stages = datapath, stages
        super().__init__({"advance": In(1), "a": In(operand_width), "b": In(operand_width),
                          "result": Out(result_width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        stages = Stages(m, self.advance)
        m.d.comb += self.result.eq(self._datapath(stages, self.a, self.b))
        stages.require_depth(self._stages, self)
        return m

    @staticmethod
    def instance(module: str, advance: Value, a: Value, b: Value, result: Signal) -> Instance:
        """An instance of the shared module named `module` driving `result` from `a` and `b`, in the sync
        domain, its stages moving on `advance`."""
        return Instance(module, i_clk=ClockSignal(), i_rst=ResetSignal(), i_advance=advance, i_a=a, i_b=b,
                        o_result=result)


class PipelinedUnit(wiring.Component):
    """A datapath of fixed `latency` between a stream input `i` and a stream output `o`, one beat per cycle.

    Timing is stated as every block states it: `latency` (cycles from a beat accepted on `i` to it valid on `o`)
    and `initiation_interval` (cycles between accepted beats), both ints on the component.

    All stages advance together whenever the output register can move (it is empty or being read). A
    stalled output therefore holds every stage, so no beat is lost, duplicated or reordered, and `i.ready`
    is exactly that advance condition. Subclasses set `latency` and define `datapath`, which must end
    with a stage call whose register is the result.
    """

    latency: int
    initiation_interval = 1

    def __init__(self, in_shape: Shape | ValueCastable, out_shape: Shape | ValueCastable) -> None:
        super().__init__({"i": In(stream.Signature(in_shape)), "o": Out(stream.Signature(out_shape))})

    def datapath(self, stages: Stages, payload) -> Value:
        raise NotImplementedError

    def elaborate(self, platform) -> Module:
        m = Module()
        advance = Signal()
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)
        stages = Stages(m, advance)
        result = self.datapath(stages, self.i.payload)
        stages.require_depth(self.latency, self)
        valid = self.i.valid
        for stage in range(1, self.latency + 1):
            delayed = Signal(name=f"s{stage}_valid")
            with m.If(advance):
                m.d.sync += delayed.eq(valid)
            valid = delayed
        m.d.comb += [
            self.i.ready.eq(advance),
            self.o.valid.eq(valid),
            self.o.payload.eq(result),
        ]
        return m

