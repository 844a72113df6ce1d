"""`rtl.generate` writes each distinct repeated submodule once (`Hierarchy`), and the result is the design Amaranth
writes flat: Yosys's equivalence checker proves it on a toy and on the buffer's banks, and refuses a changed one."""
import pytest
from amaranth.back import verilog
from amaranth.hdl import Fragment, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.generate import hierarchical_verilog, module_name, parameters, runs_at_time_zero
from rtl.registry import BLOCKS
from basedie.flow.equivalence import unproven


class Accumulate(wiring.Component):
    """Adds its input into a register of `width` bits."""

    def __init__(self, width: int) -> None:
        self.width = width
        super().__init__({"i": In(width), "o": Out(width)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.sync += self.o.eq(self.o + self.i)
        return m


class Tapped(Accumulate):
    """Holds a signal of its parent's: not a function of its parameters alone."""

    def __init__(self, width: int, tap: Signal) -> None:
        self.tap = tap
        super().__init__(width)


class Parent(wiring.Component):
    def __init__(self, odd_width: int = 8) -> None:
        self._odd_width = odd_width
        super().__init__({"i": In(4), "o": Out(8)})

    def elaborate(self, platform) -> Module:
        m = Module()
        chain = self.i
        for k in range(3):
            m.submodules[f"acc{k}"] = unit = Accumulate(4)
            m.d.comb += unit.i.eq(chain)
            chain = unit.o
        m.submodules.odd = odd = Accumulate(self._odd_width)
        m.submodules.tapped = tapped = Tapped(4, chain)
        m.d.comb += [odd.i.eq(chain), tapped.i.eq(chain), self.o.eq(odd.o ^ tapped.o)]
        return m


def test_a_repeated_submodule_is_one_module_instantiated_at_each_use() -> None:
    text = hierarchical_verilog(Parent(), "top")
    four = _elaborated(Accumulate(4))
    shared = module_name(four, parameters(four))
    assert text.count(f"module {shared}(") == 1
    assert text.count(f"  {shared} acc") == 3  # acc0, acc1, acc2 keep Amaranth's submodule names
    assert "module \\top.odd " in text and "module \\top.tapped " in text  # met once / holds a signal: in place


def _elaborated(component: wiring.Component) -> wiring.Component:
    Fragment.get(component, None)  # used, so that Amaranth does not warn of it
    return component


def test_parameters_name_a_design_by_class_signature_and_values() -> None:
    four, other_four, five = (_elaborated(Accumulate(width)) for width in (4, 4, 5))
    assert parameters(four) == parameters(other_four) != parameters(five)
    assert parameters(_elaborated(Tapped(4, Signal()))) is None
    assert parameters(object()) is None
    assert module_name(four, parameters(four)) == module_name(other_four, parameters(other_four))
    assert module_name(four, parameters(four)).startswith("accumulate_")


def test_the_shared_verilog_is_proven_equivalent_to_amaranths_and_a_changed_one_is_not(tmp_path) -> None:
    flat = runs_at_time_zero(verilog.convert(Parent(), name="top", emit_src=False))
    assert unproven(flat, runs_at_time_zero(hierarchical_verilog(Parent(), "top")), "top", tmp_path / "same") == []
    assert unproven(flat, hierarchical_verilog(Parent(odd_width=7), "top"), "top", tmp_path / "changed") != []


@pytest.mark.slow
def test_the_buffers_banks_are_written_once_and_prove_equivalent(tmp_path) -> None:
    block = BLOCKS["pnm_buffer"]
    params = block.params(total_bytes=64, banks=4, bank_bytes=4, mmu_bytes=4, array_bytes=8, vector_bytes=4)
    shared = hierarchical_verilog(block.build(params), block.name)
    assert shared.count("module bank_") == 1 and shared.count("  bank_") == 4
    flat = verilog.convert(block.build(params), name=block.name, emit_src=False)
    assert unproven(flat, shared, block.name, tmp_path) == []
