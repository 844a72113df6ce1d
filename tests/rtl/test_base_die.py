# amaranth: UnusedElaboratable=no
"""The base die's parameters (the paper's defaults give the PNM and the DQB theirs, the DQB at the MMU's request
width; bad values and combinations are one-line errors), its stated timing, and the view port under Amaranth's
simulator: which DQB requests an MMU read sequence becomes, and which DQB beats answer it."""
import pytest
from amaranth.sim import Simulator

from basedie.cli import main
from rtl.base_die.params import BaseDieParams
from rtl.base_die.top import BaseDie
from rtl.base_die.view_port import ViewPort
from rtl.dqb.params import DQBParams
from rtl.pnm.params import PNMParams
from rtl.pnm.top import PNM

SMALL = dict(lanes=2, width=8, sublane_width=4, buffer_bytes=4096, banks=8, bank_bytes=4, depth=64, address_bits=17,
             data_bits=32, mmu_outstanding=4, request_table_bytes=256, sz_buffer_bytes=256, outstanding_reads=16,
             views=8, outstanding=32)
INT4_FP16, INT8_FP16, RESERVED = 0b100, 0b101, 0b111


def test_the_papers_sizes_give_the_pnm_and_the_dqb_their_defaults() -> None:
    """The PNM's are DuoPD's; the DQB's are Table 5's except its interface (one 32-byte MMU request), its addresses
    (the MMU's 36 bits) and its clock (the die's one clock, the PNM's 1 GHz)."""
    p = BaseDieParams()
    assert p.pnm_params() == PNMParams()
    assert p.dqb_params() == DQBParams(interface_bits=256, internal_bits=512, address_bits=36,
                                           design_clock_hz=1e9)


def test_stated_timing() -> None:
    small = BaseDieParams(**SMALL)
    assert (BaseDie(small).latency, BaseDie.initiation_interval) == (PNM(small.pnm_params()).latency + 1, 1)


@pytest.mark.parametrize("fields,message", [
    (dict(out_of_order=True), "^out_of_order=True: the DQB answers in request order"),
    (dict(views=3), "^views=3 must be a power of two"),
    (dict(outstanding=2), "^outstanding=2 must be at least 4"),
    (dict(sz_buffer_bytes=100), "^sz_buffer_bytes=100 must be a multiple of 2 beats"),
    (dict(rounding="up"), "^rounding='up' is not one of"),
    (dict(data_bits=16), "^data_bits=16 must be a power of two ≥ 32"),
])
def test_invalid_parameters_are_one_line_errors(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        BaseDieParams(**(SMALL | fields))
    assert "\n" not in str(error.value)


def test_generate_refuses_a_bad_combination_in_one_line(tmp_path, capsys) -> None:
    assert main(["generate", "base_die", "--param", "out_of_order=true", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "out_of_order=True" in err
    assert list(tmp_path.iterdir()) == []


def _run_view_port(views: list[dict], reads: list[int], beats_per_request) -> tuple[list, list]:
    """The view port with `views` written, MMU reads of `reads` (row addresses) sent back to back, and a DQB stand-in
    answering each request it took with `beats_per_request(request)` beats numbered (request index << 8 | beat):
    the DQB requests (address, tag) and the MMU's answers, in order."""
    port = ViewPort(BaseDieParams(**SMALL))
    requests, answers = [], []

    async def config(ctx):
        for index, view in enumerate(views):
            ctx.set(port.config.payload, dict(index=index, enable=1, **view))
            ctx.set(port.config.valid, 1)
            await ctx.tick()
        ctx.set(port.config.valid, 0)
        await ctx.tick()
        for row in reads:
            ctx.set(port.mmu_req.payload, dict(address=row))
            ctx.set(port.mmu_req.valid, 1)
            await ctx.tick().until(port.mmu_req.ready)
        ctx.set(port.mmu_req.valid, 0)

    async def dqb(ctx):
        ctx.set(port.dqb_req.ready, 1)
        ctx.set(port.mmu_resp.ready, 1)
        queue = []
        for _ in range(200):
            if ctx.get(port.dqb_req.valid):
                request = (ctx.get(port.dqb_req.payload.address), ctx.get(port.dqb_req.payload.tag))
                requests.append(request)
                queue += [len(requests) - 1 << 8 | k for k in range(beats_per_request(request))]
            if ctx.get(port.mmu_resp.valid):
                answers.append(ctx.get(port.mmu_resp.payload.data))
            ctx.set(port.dqb_resp.valid, bool(queue))
            ctx.set(port.dqb_resp.payload.data, queue[0] if queue else 0)
            if queue and ctx.get(port.dqb_resp.ready):
                queue.pop(0)
            await ctx.tick()

    sim = Simulator(port)
    sim.add_clock(1e-6)
    sim.add_testbench(config)
    sim.add_testbench(dqb)
    sim.run()
    return requests, answers


def test_a_view_read_row_by_row_reads_each_weight_beat_once() -> None:
    """An INT4 view of 4-byte rows at rows 0x100…: rows 1–6 are beats 1–3 of weight beat 0 and 0–2 of weight
    beat 1 (weights from 0x8000); then row 0x40 outside every view passes at its byte address with the bypass tag. Each
    DQB read's 4 beats answer the rows that asked for them, the others (beat 0 of the first read, beat 3 of the
    second) dropped."""
    expansion = {INT4_FP16: 4}
    requests, answers = _run_view_port(
        [dict(view_base=0x100, view_rows=64, weight_base=0x8000, tag=INT4_FP16)],
        [0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x40], lambda r: expansion.get(r[1], 1))
    assert requests == [(0x8000, INT4_FP16), (0x8004, INT4_FP16), (0x100, 0)]
    assert answers == [0x001, 0x002, 0x003, 0x100, 0x101, 0x102, 0x200]


def test_a_row_behind_the_previous_one_or_another_view_reads_again() -> None:
    """Rows 3 then 2 of an INT8 view (two rows per weight beat): row 2 is not further along the beat row 3's read
    fetched, so it reads the beat again; a reserved-tag view expands nothing (one beat per row); the lowest
    matching view index wins."""
    expansion = {INT8_FP16: 2}
    requests, answers = _run_view_port(
        [dict(view_base=0x200, view_rows=8, weight_base=0x4000, tag=INT8_FP16),
         dict(view_base=0x200, view_rows=64, weight_base=0x9000, tag=INT4_FP16),
         dict(view_base=0x300, view_rows=8, weight_base=0x6000, tag=RESERVED)],
        [0x203, 0x202, 0x302, 0x303], lambda r: expansion.get(r[1], 1))
    assert requests == [(0x4004, INT8_FP16), (0x4004, INT8_FP16), (0x6008, RESERVED), (0x600C, RESERVED)]
    assert answers == [0x001, 0x100, 0x200, 0x300]
