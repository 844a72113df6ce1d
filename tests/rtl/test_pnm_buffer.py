# amaranth: UnusedElaboratable=no
"""The PNM buffer's parameters (the paper's 1 MB by default, invalid values refused by name), its MMU ports
(the MMU connects to them as they are), its stated timing, and the bank arbiter's rotation."""
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from basedie.cli import main
from rtl.mmu.mmu import MMU
from rtl.mmu.params import MMUParams
from rtl.pnm_buffer.arbiter import BankArbiter
from rtl.pnm_buffer.buffer import PNMBuffer
from rtl.pnm_buffer.params import BufferParams


def test_defaults_are_the_papers_megabyte_in_64_banks_of_32_bytes() -> None:
    p = BufferParams()
    assert (p.total_bytes, p.banks, p.bank_bytes, p.depth, p.line_bytes) == (1 << 20, 64, 32, 512, 2048)
    assert [port.request for port in p.ports] == ["buf_wr", "buf_rd", "array0_rd", "vu_wr", "vu_rd"]
    assert [port.response for port in p.ports] == [None, "buf_rdata", "array0_rdata", None, "vu_rdata"]
    buffer = PNMBuffer()
    assert (buffer.latency, buffer.initiation_interval) == (2, 1)


@pytest.mark.parametrize("change,message", [
    (dict(banks=3), "banks=3 must be a power of two"),
    (dict(bank_bytes=0), "bank_bytes=0 must be a power of two"),
    (dict(total_bytes=1000), "total_bytes=1000 must be a power of two"),
    (dict(total_bytes=1024), "total_bytes=1024 must be at least banks·bank_bytes=2048"),
    (dict(array_bytes=16), "array_bytes=16 must be a power of two from bank_bytes=32 to banks·bank_bytes=2048"),
    (dict(array_bytes=4096), "array_bytes=4096 must be a power of two from"),
    (dict(vector_bytes=48), "vector_bytes=48 must be a power of two from"),
    (dict(mmu_bytes=64, bank_bytes=128), "mmu_bytes=64 must be a power of two from bank_bytes=128"),
    (dict(array_ports=0), "array_ports=0 must be at least 1"),
    (dict(design_clock_hz=0), "design_clock_hz=0 must be positive"),
    (dict(banks=512, array_bytes=16384, total_bytes=1 << 24), "array_bytes=16384: port array_bytes would be"),
])
def test_invalid_parameters_are_refused_naming_the_field(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}"):
        BufferParams(**change)


def test_an_invalid_parameter_on_the_command_line_is_one_line_exit_2(tmp_path, capsys) -> None:
    assert main(["generate", "pnm_buffer", "--param", "banks=6", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "banks=6 must be a power of two" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("buffer,mmu", [
    (BufferParams(), MMUParams()),  # 1 MiB of 32-byte rows: the MMU's 15-bit buffer rows
    (BufferParams(total_bytes=16384, banks=8, bank_bytes=4, mmu_bytes=4, array_bytes=16, vector_bytes=4),
     MMUParams(data_bits=32, buffer_address_bits=12)),
])
def test_the_mmu_connects_to_the_tsv_ports_as_they_are(buffer: BufferParams, mmu: MMUParams) -> None:
    m, b, u = Module(), PNMBuffer(buffer), MMU(mmu)
    wiring.connect(m, u.buf_wr, b.buf_wr)
    wiring.connect(m, u.buf_rd, b.buf_rd)
    wiring.connect(m, b.buf_rdata, u.buf_rdata)


def grants(ports: int, banks: int, wants: list[int], masks: list[int], cycles: int) -> list[list[int]]:
    """The granted ports of each cycle after reset, every port wanting `masks[p]` all the time."""
    arbiter, seen = BankArbiter(ports, banks), []

    async def bench(ctx):
        for p in range(ports):
            ctx.set(arbiter.want[p], wants[p])
            ctx.set(arbiter.banks[p], masks[p])
        for _ in range(cycles):
            seen.append([p for p in range(ports) if ctx.get(arbiter.grant[p])])
            await ctx.tick()

    sim = Simulator(arbiter)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_one_bank_wanted_by_all_goes_round_the_ports_one_per_cycle() -> None:
    assert grants(3, 4, [1, 1, 1], [0b0001, 0b0011, 0b1001], 6) == [[0], [1], [2], [0], [1], [2]]


def test_disjoint_banks_are_all_granted_and_a_port_that_does_not_want_takes_nothing() -> None:
    assert grants(3, 4, [1, 1, 0], [0b0011, 0b0100, 0b1111], 3) == [[0, 1]] * 3


def test_a_conflict_goes_to_the_first_in_the_rotated_order_and_the_others_still_fill_free_banks() -> None:
    # Port 0 and 1 want bank 0; port 2 bank 1: port 2 is granted every cycle, 0 and 1 alternate (the first
    # place rotates 0, 1, 2, 0: at first place 2, port 0 comes before port 1).
    assert grants(3, 2, [1, 1, 1], [0b01, 0b01, 0b10], 4) == [[0, 2], [1, 2], [0, 2], [0, 2]]
