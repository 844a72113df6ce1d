"""Organisation and timing of one HBM pseudo channel, in cycles of its command clock (tCK), with the HBM3 and HBM4
parameter sets and where every number comes from.

Sources, pinned to the commit read:
- [R2-HBM3] Ramulator2 (github.com/CMU-SAFARI/ramulator2 @ c5b1c3a4), `python/ramulator/dram/hbm3.py`: timing
  preset "HBM3_6400Mbps", organisation preset "HBM3_16Gb_8hi" (JEDEC JESD238 Table 4), and `_resolve_nRFC`
  (JESD238 Table 84: tRFC by channel density) / `_resolve_nREFI` (3,900 ns).
- [R2-HBM4] the same commit, `python/ramulator/dram/hbm4.py`: timing preset "HBM4_8000Mbps", organisation preset
  "HBM4_32Gb_16Hi", `_resolve_nRFC` (530 ns for a 16 Gb channel) and `_resolve_nREFI` (3,900 ns).
- [DS3] DRAMSim3 (github.com/umd-memsys/DRAMsim3 @ 29817593), `configs/HBM2_8Gb_x128.ini`: the controller's
  transaction queue (`trans_queue_size = 32`), the open-page policy and the row-high address mapping
  (`address_mapping = rorabgbachco`); DuoPD's own evaluation runs DRAMSim3 (§6.1).
Ramulator2 states the JEDEC values in tCK; no public JEDEC table is quoted here beyond what its sources cite.
"""
from dataclasses import dataclass

from rtl.params import Params, require_at_least, require_power_of_two


@dataclass(frozen=True)
class DramTiming(Params):
    """One pseudo channel: its organisation (a power of two of each) and its timing, in tCK. Field names follow
    JEDEC's (tRCD_RD → `rcd_rd`); a column command moves one burst of `burst_bytes`."""
    name: str = "HBM3"
    tck_ps: int = 625
    data_bits: int = 32
    """Width of the pseudo channel's data bus."""
    burst_length: int = 8
    sids: int = 2
    """Stack IDs (the dies of a channel that a pseudo channel's banks are spread over)."""
    bankgroups: int = 4
    """Bank groups per SID."""
    banks_per_group: int = 4
    rows: int = 16384
    columns: int = 32
    """Bursts per row (a row of `columns * burst_bytes` bytes)."""
    bl: int = 2
    """tCK a burst occupies the data bus (nBL)."""
    cl: int = 20
    cwl: int = 10
    rcd_rd: int = 31
    rcd_wr: int = 15
    rp: int = 26
    ras: int = 45
    rc: int = 72
    wr: int = 33
    """Write recovery: last write data to precharge."""
    rtp: int = 9
    ccd_s: int = 2
    """Column to column, other bank group of the same SID."""
    ccd_l: int = 4
    """Column to column, same bank group."""
    ccd_r: int = 3
    """Read to read, other SID."""
    rrd_s: int = 4
    rrd_l: int = 5
    faw: int = 24
    wtr_s: int = 7
    wtr_l: int = 10
    rtw: int = 20
    """Read to write command spacing on the pseudo channel."""
    ppd: int = 2
    """Precharge to precharge."""
    rfc: int = 560
    """All-bank refresh cycle: refresh to the next activate."""
    refi: int = 6240
    """Average interval between all-bank refreshes."""

    def validate(self) -> None:
        for name in ("data_bits", "burst_length", "sids", "bankgroups", "banks_per_group", "rows", "columns"):
            require_power_of_two(self, name)
        for name in ("tck_ps", "bl", "cl", "cwl", "rcd_rd", "rcd_wr", "rp", "ras", "rc", "rtp", "ccd_s", "ccd_l",
                     "ccd_r", "rrd_s", "rrd_l", "faw", "rtw", "ppd", "rfc"):
            require_at_least(self, name, 1)
        for name in ("wr", "wtr_s", "wtr_l"):
            require_at_least(self, name, 0)
        if self.refi <= self.rfc:
            raise ValueError(f"refi={self.refi} must exceed rfc={self.rfc} (a refresh must end before the next)")

    @property
    def burst_bytes(self) -> int:
        return self.data_bits * self.burst_length // 8

    @property
    def banks(self) -> int:
        return self.sids * self.bankgroups * self.banks_per_group

    @property
    def bytes(self) -> int:
        return self.banks * self.rows * self.columns * self.burst_bytes


# [R2-HBM3] timing "HBM3_6400Mbps" (tCK_ps 625: 1.6 GHz CK, 4 data beats per CK, so BL8 takes nBL = 2) and
# organisation "HBM3_16Gb_8hi" (sid 2, bankgroup 4, bank 4, row 1<<14, 32 bursts per row, dq 32): the 16 GB
# 8-high stack of 16 Gb dies an H100 carries. tRFC: channel density 16384 Mb / 2 SIDs = 8192 Mb → 350 ns
# (JESD238 Table 84 as coded in `_resolve_nRFC`) = ceil(350 / 0.625) = 560 tCK; tREFI = 3,900 ns = 6240 tCK.
HBM3 = DramTiming()

# [R2-HBM4] timing "HBM4_8000Mbps" (tCK_ps 500) and organisation "HBM4_32Gb_16Hi" (sid 4, bankgroup 2, bank 8,
# row 1<<14, 32 bursts per row, dq 32): a 64 GB 16-high stack, the capacity the MMU's 36-bit addresses cover.
# tRFC: a 16384 Mb channel → 530 ns = 1060 tCK; tREFI = 3,900 ns = 7800 tCK. (DuoPD's stack is 48 GB of 24 Gb
# dies, §6.1; Ramulator2 has no 24 Gb preset, and the die density changes only tRFC and the row count.)
HBM4 = DramTiming(
    name="HBM4", tck_ps=500, sids=4, bankgroups=2, banks_per_group=8,
    cl=20, cwl=10, rcd_rd=39, rcd_wr=19, rp=33, ras=57, rc=90, wr=42, rtp=12,
    ccd_s=2, ccd_l=4, ccd_r=2, rrd_s=5, rrd_l=7, faw=30, wtr_s=9, wtr_l=13, rtw=25, ppd=2, rfc=1060, refi=7800)

PRESETS: dict[str, DramTiming] = {"hbm3": HBM3, "hbm4": HBM4}
MEMORIES = ("ideal", *PRESETS)
"""The memory models a bench can put behind a block: `ideal` is `tb.memory.MemoryController` (a fixed latency,
always ready), the others a pseudo channel with these parameters."""
