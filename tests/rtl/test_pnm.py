# amaranth: UnusedElaboratable=no
"""The PNM top's parameters (the paper's defaults give every unit its own defaults; bad values are one-line errors
naming the field), its stated timing, and the write arbiter under Amaranth's simulator."""
import pytest
from amaranth.hdl import unsigned
from amaranth.sim import Simulator

from basedie.cli import main

from rtl.mmu.mmu import MMU
from rtl.mmu.params import MMUParams
from rtl.pnm_lane.params import LaneParams
from rtl.pnm_buffer.params import BufferParams
from rtl.pnm_controller.controller import PNMController
from rtl.pnm_controller.params import ControllerParams
from rtl.pnm.arbiter import WriteArbiter
from rtl.pnm.params import PNMParams
from rtl.pnm.top import PNM
from rtl.pnm_vector.params import VectorParams


def test_the_papers_sizes_give_every_unit_its_defaults() -> None:
    """§4.2: 16 lanes of 1,024, a 1 MB buffer, 32-B requests: the units' own defaults (each the paper's or the
    unit's documented choice), and a vector unit one 32-B row (8 FP32) wide."""
    p = PNMParams()
    assert (p.lanes, p.width, p.buffer_bytes, p.row_bytes, p.tile_bytes) == (16, 1024, 1 << 20, 32, 2048)
    assert p.buffer_params() == BufferParams()
    assert p.controller_params() == ControllerParams()
    assert p.mmu_params() == MMUParams()
    assert p.lane_params() == LaneParams()
    assert p.vector_params() == VectorParams(width=8)


def test_stated_timing() -> None:
    top = PNM(PNMParams(lanes=2, width=8, sublane_width=8, buffer_bytes=4096, banks=8, bank_bytes=4, depth=64,
                        address_bits=16, data_bits=32))
    assert (top.latency, top.initiation_interval) == (PNMController.latency + MMU.latency + 1, 1) == (7, 1)


@pytest.mark.parametrize("fields,message", [
    (dict(lanes=0), "^lanes=0 must be at least 1"),
    (dict(data_bits=16), "^data_bits=16 must be a power of two ≥ 32"),
    (dict(width=1000), "^width=1000 must be a power of two"),
    (dict(buffer_bytes=3 << 18), "^buffer_bytes=786432 must be a power of two"),
    (dict(buffer_bytes=16, data_bits=256), "^buffer_bytes=16 must hold at least one 32-byte row"),
    (dict(banks=48), "^banks=48 must be a power of two"),
    (dict(depth=100), "^depth=100 must be a power of two"),
    (dict(width=4096), "^width=4096: port i"),
    (dict(banks=32), r"^width=1024: a lane's operand tile \(2048 B\) must fit one buffer line \(banks·bank_bytes = 1024 B\)"),
])
def test_invalid_parameters_are_one_line_errors(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        PNMParams(**fields)
    assert "\n" not in str(error.value)


def test_the_write_arbiter_alternates_and_holds_an_offer() -> None:
    """Both writers waiting: grants alternate. An offer the port does not take stays the same offer (the stream
    rule), even when the other writer would now be preferred."""
    arbiter = WriteArbiter(unsigned(8))
    seen = []

    async def bench(ctx):
        ctx.set(arbiter.first.payload, 1)
        ctx.set(arbiter.second.payload, 2)
        ctx.set(arbiter.first.valid, 1)
        ctx.set(arbiter.second.valid, 1)
        for ready in (1, 1, 1, 0, 0, 1, 1):
            ctx.set(arbiter.o.ready, ready)
            seen.append((ready, ctx.get(arbiter.o.payload)))
            await ctx.tick()

    sim = Simulator(arbiter)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # 1, 2, 1 taken; then 2 offered and held over two refused cycles, taken; then 1.
    assert [payload for _, payload in seen] == [1, 2, 1, 2, 2, 2, 1]


def test_generate_refuses_a_bad_size_in_one_line(tmp_path, capsys) -> None:
    assert main(["generate", "pnm", "--param", "banks=32", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "width=1024: a lane's operand tile (2048 B) must fit one buffer line" in err
    assert list(tmp_path.iterdir()) == []
