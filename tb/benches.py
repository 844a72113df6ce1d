"""What `basedie verify` runs: for each registered block, its cocotb bench and the parameter sets it proves."""
from dataclasses import dataclass

from rtl.fp.convert import ROUNDINGS


@dataclass(frozen=True)
class Bench:
    block: str
    module: str
    configs: tuple[dict, ...] = ({},)
    """Parameter sets proved by both `pytest` and `basedie verify` (less `pytest_leaves`)."""
    pytest_leaves: tuple[dict, ...] = ()
    """Of `configs`, the sets `pytest` leaves to `basedie verify` under Verilator (Icarus still runs them, on its
    shorter stimulus), because the other sets already build and exercise their logic: keeps the default test run
    short. `basedie verify`, `--quick` included, proves them as any other."""
    verify_only: tuple[dict, ...] = ()
    """Parameter sets too slow to build on every test run (full-width datapaths): `basedie verify` proves them,
    and `pytest` checks that the committed table holds their figures for the current RTL."""
    verify_only_minutes: float | None = None
    """Stated wall time of one `verify_only` set's first build and bench run on 2 cores: the progress estimate
    until a time has been recorded on this machine."""
    synthesis_budget_s: float | None = None
    """Seconds of Yosys after which a `configs` set may stand in the synthesis table as attempted (no figures);
    None: its figures are required. The table test checks that an attempt was given at least this budget."""
    dram: bool = False
    """Its bench can put the DRAM model (`tb.dram`) behind the block's memory port (`basedie verify --memory`)."""
    memory: str = "ideal"
    """The memory model `basedie verify` puts behind the block unless `--memory-model` names another."""


BENCHES: dict[str, Bench] = {bench.block: bench for bench in (
    Bench("fp_to_fp32", "tb.fp.bench",
          tuple({"source": s} for s in ("int4", "int8", "fp8_e4m3", "fp16", "bf16"))),
    # ~300,000 vectors per set, 85 s of bench each on the 2-core CI machine: pytest proves each target once and
    # each rounding once (FP16 to nearest even, BF16 toward zero); `basedie verify` all four.
    Bench("fp32_narrow", "tb.fp.bench",
          tuple({"target": t, "rounding": r} for t in ("fp16", "bf16") for r in ROUNDINGS),
          pytest_leaves=({"target": "fp16", "rounding": "toward_zero_ftz"},
                         {"target": "bf16", "rounding": "nearest_even"})),
    Bench("fp32_add", "tb.fp.bench"),
    Bench("fp32_mul", "tb.fp.bench"),
    Bench("fp16_mul_fp32", "tb.fp.bench"),
    # The table's MMU figures come from an HBM4 pseudo channel, DuoPD's memory (§4.2: eight HBM4 stacks per GPU);
    # pytest runs its bench behind the ideal controller, where the arbiter's exact grant order is checked.
    Bench("mmu", "tb.mmu.bench", ({"out_of_order": False}, {"out_of_order": True}), dram=True, memory="hbm4"),
    # pytest proves 2-wide lanes (two 1-wide sublanes); `basedie verify` adds the paper's 1,024-wide lane (a
    # 13-minute build) and the 16-lane array at a reduced width.
    Bench("pnm_lane", "tb.pnm.bench", ({"width": 2, "sublane_width": 1},),
          verify_only=({"width": 1024, "sublane_width": 128},), verify_only_minutes=13),
    Bench("pnm_array", "tb.pnm.bench", ({"width": 2, "sublane_width": 1, "lanes": 2},),
          verify_only=({"width": 16, "sublane_width": 4, "lanes": 16},)),
    # Two FP32 lanes in pytest and `basedie verify` (a 35-minute build on the loaded 2-core machine); wider sets by
    # name (`--param width=4`).
    # Yosys ran the 2-wide vector unit (a 123-stage FP32 chain per lane) for over 40 minutes without finishing.
    Bench("pnm_vector", "tb.pnm_vector.bench", ({"width": 2},), synthesis_budget_s=300),
    # A 64-word buffer, 1,024 buffer rows, a 1 MiB address space and 128-byte tensors keep the random programs'
    # operands and tensors small enough to cover the buffer's ends and the address space's; the logic is the same.
    Bench("pnm_controller", "tb.pnm_controller.bench",
          ({"depth": 64, "buffer_address_bits": 10, "address_bits": 20, "max_sub_requests": 4, "mmu_outstanding": 4},)),
    # pytest: 16 KB in 8 banks of 4 bytes, where a 16-byte array row spans half the banks, so every port fits on
    # disjoint banks at once. `basedie verify` adds the paper's banking and ports (64 banks of 32 B, 2 KB rows)
    # at 64 KB (a 10-minute build on the loaded 2-core machine): conflicts depend on the banks, not the depth.
    Bench("pnm_buffer", "tb.pnm_buffer.bench", ({"total_bytes": 16384, "banks": 8, "bank_bytes": 4, "mmu_bytes": 4,
                                                 "array_bytes": 16, "vector_bytes": 4},),
          verify_only=({"total_bytes": 65536},), verify_only_minutes=10),
    # The whole PNM at a small size: 2 lanes of 8 FP16 (2 sublanes of 4), 4-byte rows (so a 1-lane vector unit),
    # 4 KB of buffer in 8 banks of 4 B, a 64-word program and a 64 KB address space. Its build is dominated by the
    # vector unit's, and so is its synthesis: Yosys did not finish in 15 minutes (as for the vector unit alone).
    Bench("pnm", "tb.pnm_top.bench", ({"lanes": 2, "width": 8, "sublane_width": 4, "buffer_bytes": 4096, "banks": 8,
                                       "bank_bytes": 4, "depth": 64, "address_bits": 16, "data_bits": 32,
                                       "mmu_outstanding": 4},), synthesis_budget_s=900),
    # A 32-bit interface (2 lanes, 8 table entries, 32+32 S/Z lines) keeps the pytest builds to minutes; the
    # full Table 5 configuration (512-bit interface, 32 lanes: a 7-minute build) is proved by `basedie verify`.
    Bench("dqb", "tb.dqb.bench",
          tuple({"interface_bits": 32, "internal_bits": 64, "request_table_bytes": 256, "sz_buffer_bytes": 256,
                 "outstanding_reads": 16, "rounding": r} for r in ROUNDINGS),
          verify_only=({"interface_bits": 512, "internal_bits": 1024, "rounding": "nearest_even"},),
          verify_only_minutes=7, dram=True),
    # The PNM's small set (2 lanes of 8 FP16, 4-byte rows) with a 128 KiB address space (the decode layer's
    # operands below 64 KiB, the quantized weights above) and the small DQB's sizes (8 table entries, 32+32 S/Z
    # lines); its build, like the PNM's, is dominated by the vector unit's (22 minutes on the loaded 2-core machine).
    # The table's figures come from the ideal controller, as pytest's; `--memory-model hbm4` puts DuoPD's memory
    # behind the DQB (each decode layer then takes minutes more of simulation).
    Bench("base_die", "tb.base_die.bench",
          ({"lanes": 2, "width": 8, "sublane_width": 4, "buffer_bytes": 4096, "banks": 8, "bank_bytes": 4, "depth": 64,
            "address_bits": 17, "data_bits": 32, "mmu_outstanding": 4, "request_table_bytes": 256,
            "sz_buffer_bytes": 256, "outstanding_reads": 16, "views": 8, "outstanding": 32},),
          synthesis_budget_s=900, dram=True),
)}
