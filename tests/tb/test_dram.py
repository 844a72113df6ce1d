"""The pseudo-channel DRAM model against command sequences computed by hand from the HBM3 parameters
(tb/dram/timing.py, Ramulator2's HBM3_6400Mbps, in tCK):

    bl 2   cl 20   cwl 10   rcd_rd 31   rcd_wr 15   rp 26   ras 45   rc 72   wr 33   rtp 9
    ccd_s 2   ccd_l 4   ccd_r 3   rrd_s 4   rrd_l 5   faw 24   wtr_s 7   wtr_l 10   rtw 20   rfc 560   refi 6240

A read's data is done cl + bl = 22 cycles after its RD, a write's cwl + bl = 12 after its WR. Addresses follow
the default mapping row:sid:bank:bankgroup:column (1, 2, 4, 4 and 32 values below the row), so bank index
(sid * 4 + bankgroup) * 4 + bank. No simulator needed.
"""
import pytest

from tb.dram.channel import DRAMControllerParams, PseudoChannel, DRAMRequest
from tb.dram.mapping import Location, decode
from tb.dram.timing import HBM3, HBM4, DramTiming


def address(row: int = 0, sid: int = 0, bank: int = 0, bankgroup: int = 0, column: int = 0) -> int:
    """The burst address of a location under row:sid:bank:bankgroup:column, written out by hand."""
    return (((row * 2 + sid) * 4 + bank) * 4 + bankgroup) * 32 + column


def run(channel: PseudoChannel, arrivals: list[tuple[int, DRAMRequest]], until: int | None = None) -> dict[int, int]:
    """Accept each request at its cycle (in list order), step until every one has left (or `until`); returns
    {request index: cycle its response left}."""
    left: dict[int, int] = {}
    index = {id(r): k for k, (_, r) in enumerate(arrivals)}
    pending = list(arrivals)
    while len(left) < len(arrivals) if until is None else channel.now < until:
        while pending and pending[0][0] <= channel.now:
            channel.accept(pending.pop(0)[1])
        now = channel.now
        for r in channel.step():
            left[index[id(r)]] = now
        assert channel.now < 100_000, "requests never left"
    return left


def commands(channel: PseudoChannel, *names: str) -> list[tuple[int, str, int]]:
    return [(cycle, command, bank) for cycle, command, bank, _ in channel.commands if command in names]


def reads(*locations: dict) -> list[tuple[int, DRAMRequest]]:
    return [(0, DRAMRequest(address(**where))) for where in locations]


def test_mapping_splits_addresses_by_hand():
    # 0x12345 = 0b1001000_1_10_10_00101 (row 72, sid 1, bank 2, bankgroup 2, column 5).
    assert decode(0x12345, HBM3) == Location(sid=1, bankgroup=2, bank=2, row=72, column=5)
    # row:sid:bank:column:bankgroup splits the same bits as 0b1001000_1_10_10001_01.
    assert decode(0x12345, HBM3, "row:sid:bank:column:bankgroup") == Location(sid=1, bankgroup=1, bank=2, row=72,
                                                                                column=0b10001)
    with pytest.raises(ValueError, match="outside"):
        decode(HBM3.bytes // 32, HBM3)
    with pytest.raises(ValueError, match="once"):
        DRAMControllerParams(mapping="row:bank:bankgroup:column")


def test_presets_describe_the_cited_stacks():
    # HBM3_16Gb_8hi: 32 banks x 16384 rows x 1 KiB = 512 MiB per pseudo channel, 32 of them = a 16 GiB stack.
    assert (HBM3.burst_bytes, HBM3.banks, HBM3.bytes * 32) == (32, 32, 16 << 30)
    # HBM4_32Gb_16Hi: 64 banks x 16384 x 1 KiB = 1 GiB per pseudo channel, 64 of them = 64 GiB (36-bit addresses).
    assert (HBM4.burst_bytes, HBM4.banks, HBM4.bytes * 64) == (32, 64, 64 << 30)
    with pytest.raises(ValueError, match="refi"):
        DramTiming(refi=100, rfc=560)


def test_row_hit_stream_in_one_bank_group():
    """One ACT, then the reads of one row at tCCD_L (same bank group): RDs at 31, 35, ..., 59."""
    channel = PseudoChannel(HBM3)
    left = run(channel, reads(*({"column": c} for c in range(8))))
    assert commands(channel, "ACT", "PRE") == [(0, "ACT", 0)]
    assert [cycle for cycle, _, _ in commands(channel, "RD")] == [31 + 4 * k for k in range(8)]
    assert [left[k] for k in range(8)] == [53 + 4 * k for k in range(8)]


def test_row_hits_across_bank_groups_at_tccd_s():
    """With rows open in bank groups 0 and 1 (ACTs at 0 and rrd_s = 4, RDs at 31 and 35), reads that alternate
    between them issue every tCCD_S = 2 cycles (= bl: the data bus is full); in one bank group every tCCD_L = 4."""
    channel = PseudoChannel(HBM3)
    warm = reads({"bankgroup": 0}, {"bankgroup": 1})
    alternating = [(100, DRAMRequest(address(bankgroup=k % 2, column=1 + k // 2))) for k in range(8)]
    left = run(channel, warm + alternating)
    assert [c for c, _, _ in commands(channel, "ACT")] == [0, 4]
    assert [c for c, _, _ in commands(channel, "RD")] == [31, 35] + [100 + 2 * k for k in range(8)]
    assert [left[2 + k] for k in range(8)] == [122 + 2 * k for k in range(8)]

    channel = PseudoChannel(HBM3)
    run(channel, warm + [(100, DRAMRequest(address(bankgroup=0, column=1 + k))) for k in range(8)])
    assert [c for c, _, _ in commands(channel, "RD")][2:] == [100 + 4 * k for k in range(8)]


def test_row_miss_ping_pong_in_one_bank():
    """Reads alternating between rows 0 and 1 of bank 0, in arrival order (FCFS). ACT 0, RD 31 (data 53); PRE waits
    for tRAS: 0 + 45 = 45 (RD + tRTP = 40 is earlier); ACT at PRE + tRP = 71 is too soon for tRC: 0 + 72 = 72;
    RD 72 + 31 = 103 (data 125); PRE max(72 + 45, 103 + 9) = 117; ACT max(117 + 26, 72 + 72) = 144; ... one
    access every tRC = 72."""
    channel = PseudoChannel(HBM3, DRAMControllerParams(scheduling="fcfs"))
    left = run(channel, reads(*({"row": k % 2} for k in range(4))))
    assert commands(channel, "ACT", "PRE", "RD") == [
        (0, "ACT", 0), (31, "RD", 0), (45, "PRE", 0), (72, "ACT", 0), (103, "RD", 0), (117, "PRE", 0),
        (144, "ACT", 0), (175, "RD", 0), (189, "PRE", 0), (216, "ACT", 0), (247, "RD", 0)]
    assert [left[k] for k in range(4)] == [53, 125, 197, 269]
    # FR-FCFS serves the third read (a row-0 hit) before closing row 0: RD 31 + tCCD_L 4 = 35; PRE still at
    # tRAS 45, ACT 72, RDs 103 and 107. In-order responses: the hit's data (57) waits for the second read's (125).
    channel = PseudoChannel(HBM3)
    left = run(channel, reads(*({"row": k % 2} for k in range(4))))
    assert commands(channel, "ACT", "PRE", "RD") == [
        (0, "ACT", 0), (31, "RD", 0), (35, "RD", 0), (45, "PRE", 0), (72, "ACT", 0), (103, "RD", 0), (107, "RD", 0)]
    assert [left[k] for k in range(4)] == [53, 125, 125, 129]


def test_isolated_row_conflict_costs_trp_trcd_cl():
    """A read to another row of an open bank, long after tRAS: PRE at once, data tRP + tRCD_RD + CL + BL =
    26 + 31 + 20 + 2 = 79 cycles after arrival; to a closed bank tRCD_RD + CL + BL = 53; a row hit CL + BL = 22."""
    channel = PseudoChannel(HBM3)
    left = run(channel, reads({"row": 0}) + [(200, DRAMRequest(address(row=1)))] + [(400, DRAMRequest(address(row=1)))]
               + [(600, DRAMRequest(address(bank=1)))])
    assert (left[0], left[1] - 200, left[2] - 400, left[3] - 600) == (53, 79, 22, 53)


def test_tfaw_limits_activates_across_banks():
    """Six reads to six banks in different bank groups (four in SID 0, two in SID 1): ACTs tRRD_S = 4 apart,
    0, 4, 8, 12; the fifth must wait for tFAW after the first, 0 + 24 = 24, the sixth for 4 + 24 = 28."""
    channel = PseudoChannel(HBM3)
    banks = [{"bankgroup": g} for g in range(4)] + [{"sid": 1, "bankgroup": g} for g in range(2)]
    left = run(channel, reads(*banks))
    assert [c for c, _, _ in commands(channel, "ACT")] == [0, 4, 8, 12, 24, 28]
    # Each RD tRCD_RD after its ACT; other bank groups and SIDs allow it (tCCD_S 2, tCCD_R 3).
    assert [left[k] for k in range(6)] == [a + 53 for a in (0, 4, 8, 12, 24, 28)]


def test_trrd_l_within_a_bank_group():
    """Two banks of one bank group: the second ACT waits tRRD_L = 5, not tRRD_S = 4."""
    channel = PseudoChannel(HBM3)
    run(channel, reads({"bank": 0}, {"bank": 1}))
    assert [c for c, _, _ in commands(channel, "ACT")] == [0, 5]


def test_refresh_blocks_for_trfc_every_trefi():
    """An idle channel refreshes at 6240, 12480, 18720. With a row open (a read at 0: ACT 0, RD 31), the refresh
    due at 6240 first closes it with PREA (tRAS and tRTP long past) at 6240, then REF at 6240 + tRP = 6266;
    a read arriving at 6240 waits for REF + tRFC = 6826 to activate, RD 6857, data 6879."""
    channel = PseudoChannel(HBM3)
    run(channel, [], until=3 * 6240 + 1)
    assert commands(channel, "REF", "PREA") == [(6240, "REF", -1), (12480, "REF", -1), (18720, "REF", -1)]

    channel = PseudoChannel(HBM3)
    left = run(channel, reads({}) + [(6240, DRAMRequest(address(column=1)))])
    assert commands(channel, "PREA", "REF", "ACT", "RD") == [
        (0, "ACT", 0), (31, "RD", 0), (6240, "PREA", -1), (6266, "REF", -1), (6826, "ACT", 0), (6857, "RD", 0)]
    assert left[1] == 6879


def test_read_write_turnarounds():
    """Rows open in bank groups 0 and 1 (reads at 0: ACTs 0 and 4). Then, each pair arriving together:
    write→read in one bank group: RD tCWL + BL + tWTR_L = 10 + 2 + 10 = 22 after WR;
    write→read across bank groups: 10 + 2 + tWTR_S 7 = 19 after WR;
    read→write: WR tRTW = 20 after RD. Writes are done CWL + BL = 12 after WR, reads 22 after RD."""
    channel = PseudoChannel(HBM3)
    arrivals = reads({"bankgroup": 0}, {"bankgroup": 1}) + [
        (200, DRAMRequest(address(column=1), is_write=True)), (200, DRAMRequest(address(column=2))),
        (400, DRAMRequest(address(column=3), is_write=True)), (400, DRAMRequest(address(bankgroup=1, column=3))),
        (600, DRAMRequest(address(column=4))), (600, DRAMRequest(address(column=5), is_write=True))]
    left = run(channel, arrivals)
    assert commands(channel, "RD", "WR")[2:] == [(200, "WR", 0), (222, "RD", 0), (400, "WR", 0), (419, "RD", 4),
                                                 (600, "RD", 0), (620, "WR", 0)]
    assert [left[k] for k in range(2, 8)] == [212, 244, 412, 441, 622, 632]


def test_frfcfs_serves_a_younger_row_hit_before_an_older_miss():
    """Row 0 of bank 0 open (a read at 0). At 100 a read to row 1 (older) and one to row 0 (younger) arrive.
    FR-FCFS: the hit's RD at 100 (data 122); then PRE at RD + tRTP = 109, ACT 135, the miss's RD 166 (data 188)."""
    arrivals = reads({}) + [(100, DRAMRequest(address(row=1))), (100, DRAMRequest(address(row=0, column=1)))]
    channel = PseudoChannel(HBM3, DRAMControllerParams(in_order=False))
    left = run(channel, arrivals)
    assert commands(channel, "PRE", "ACT", "RD")[2:] == [(100, "RD", 0), (109, "PRE", 0), (135, "ACT", 0),
                                                         (166, "RD", 0)]
    assert (left[1], left[2]) == (188, 122)
    # Responses in order: the hit's waits for the older miss's; the commands are the same.
    channel = PseudoChannel(HBM3, DRAMControllerParams(in_order=True))
    left = run(channel, [(c, DRAMRequest(r.address)) for c, r in arrivals])
    assert (left[1], left[2]) == (188, 188)


def test_fcfs_does_not_reorder():
    """The same requests under FCFS: the miss first, PRE at 100 (tRAS and tRTP long past), ACT 126, RD 157 (data
    179); then the younger read needs row 0 again: PRE max(126 + tRAS 45, 157 + tRTP 9) = 171, ACT
    max(171 + tRP 26, 126 + tRC 72) = 198, RD 229 (data 251)."""
    channel = PseudoChannel(HBM3, DRAMControllerParams(scheduling="fcfs", in_order=False))
    left = run(channel, reads({}) + [(100, DRAMRequest(address(row=1))), (100, DRAMRequest(address(row=0, column=1)))])
    assert commands(channel, "PRE", "ACT", "RD")[2:] == [(100, "PRE", 0), (126, "ACT", 0), (157, "RD", 0),
                                                         (171, "PRE", 0), (198, "ACT", 0), (229, "RD", 0)]
    assert (left[1], left[2]) == (179, 251)


def test_fcfs_opens_rows_of_other_banks_ahead():
    """FCFS keeps column commands in order but activates other banks meanwhile: two reads to two bank groups
    give ACTs 0 and 4 and RDs 31 and 35, exactly as FR-FCFS (no reordering was needed)."""
    channel = PseudoChannel(HBM3, DRAMControllerParams(scheduling="fcfs"))
    run(channel, reads({"bankgroup": 0}, {"bankgroup": 1}))
    assert commands(channel, "ACT", "RD") == [(0, "ACT", 0), (4, "ACT", 4), (31, "RD", 0), (35, "RD", 4)]


def test_same_address_is_never_reordered():
    """A read and then a write to one address arrive together: the write could issue at tRCD_WR = 15, before the
    read's tRCD_RD = 31, but would overwrite what the read must see; it waits for RD 31 + tRTW 20 = 51. A write
    to another column of the row does not wait: WR 15, and the read then waits tCWL + BL + tWTR_L = 22: RD 37."""
    channel = PseudoChannel(HBM3)
    run(channel, [(0, DRAMRequest(address())), (0, DRAMRequest(address(), is_write=True))])
    assert commands(channel, "RD", "WR") == [(31, "RD", 0), (51, "WR", 0)]
    channel = PseudoChannel(HBM3)
    run(channel, [(0, DRAMRequest(address())), (0, DRAMRequest(address(column=1), is_write=True))])
    assert commands(channel, "RD", "WR") == [(15, "WR", 0), (37, "RD", 0)]


def test_bounded_queue():
    """A full queue refuses; a request leaves it when its column command issues (RD at 31)."""
    channel = PseudoChannel(HBM3, DRAMControllerParams(queue_depth=2))
    channel.accept(DRAMRequest(address(column=0)))
    channel.accept(DRAMRequest(address(column=1)))
    assert not channel.can_accept()
    with pytest.raises(RuntimeError, match="full"):
        channel.accept(DRAMRequest(address(column=2)))
    for _ in range(31):
        channel.step()
    assert not channel.can_accept()
    channel.step()  # cycle 31: the first RD
    assert channel.can_accept()


def test_hbm4_idle_read_and_row_conflict():
    """HBM4 (HBM4_8000Mbps: rcd_rd 39, cl 20, bl 2, rp 33, ras 57): a read to a closed bank is done 39 + 20 + 2 = 61
    tCK after arrival; a row conflict long after tRAS 33 + 61 = 94 tCK. (HBM4's mapping has 1 SID bit more:
    row:sid:bank:bankgroup:column with 4, 8, 2 and 32 values, so row 1 is 2048 bursts further.)"""
    channel = PseudoChannel(HBM4)
    left = run(channel, [(0, DRAMRequest(0)), (300, DRAMRequest(4 * 8 * 2 * 32))])
    assert (left[0], left[1] - 300) == (61, 94)


def test_reads_alternating_between_sids_at_tccd_r():
    """Rows open in bank group 0 of SID 0 and of SID 1 (ACTs 0 and 4, RDs 31 and 35). Reads alternating between
    the SIDs issue tCCD_R = 3 apart (not tCCD_S = 2: another die); writes alternating between them only need the
    data bus, BL = 2 apart."""
    warm = reads({"sid": 0}, {"sid": 1})
    channel = PseudoChannel(HBM3)
    run(channel, warm + [(100, DRAMRequest(address(sid=k % 2, column=1 + k // 2))) for k in range(6)])
    assert [c for c, _, _ in commands(channel, "RD")] == [31, 35] + [100 + 3 * k for k in range(6)]
    channel = PseudoChannel(HBM3)
    run(channel, warm + [(100, DRAMRequest(address(sid=k % 2, column=1 + k // 2), is_write=True)) for k in range(6)])
    assert [c for c, _, _ in commands(channel, "WR")] == [100 + 2 * k for k in range(6)]


def _write_behind_reads() -> list[tuple[int, DRAMRequest]]:
    """Rows open in bank groups 0 and 1 (reads at 0: RDs 31 and 35). From 100 a read to bank group 0 every 4
    cycles (tCCD_L: each issues as it arrives); at 101 a write to bank group 1."""
    stream = [(100 + 4 * k, DRAMRequest(address(column=k % 32))) for k in range(150)]
    return reads({"bankgroup": 0}, {"bankgroup": 1}) + stream[:1] + [
        (101, DRAMRequest(address(bankgroup=1, column=1), is_write=True))] + stream[1:]


def test_age_cap_ends_a_writes_starvation_behind_reads():
    """Each read renews the write's read-to-write turnaround (RD + tRTW 20), so under plain FR-FCFS it never issues.
    With `age_cap` 256 the write is served in order from 101 + 256 = 357: the last read went at 356
    (100 + 4 × 64), the WR at 356 + 20 = 376 (bank 4: bank group 1), the next read at WR + tCWL + BL + tWTR_S =
    376 + 10 + 2 + 7 = 395, then every tCCD_L."""
    channel = PseudoChannel(HBM3, DRAMControllerParams(age_cap=256))
    run(channel, _write_behind_reads(), until=400)
    assert commands(channel, "WR") == [(376, "WR", 4)]
    assert [c for c, _, _ in commands(channel, "RD") if 340 <= c < 400] == [340, 344, 348, 352, 356, 395, 399]
    starved = PseudoChannel(HBM3, DRAMControllerParams(age_cap=10**6))
    run(starved, _write_behind_reads(), until=700)
    assert commands(starved, "WR") == []
