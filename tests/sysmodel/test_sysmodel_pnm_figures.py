"""One source of truth: the PNM's and the MMU's hardware numbers (lane width, lanes, latency, MACs per cycle,
design clock) come from the verified entries `hardware.pnm` names, and a parameter set nobody verified is refused
with the command that verifies it."""
import json
import re

import pytest

import basedie.verified
from basedie.cli import main
from basedie.verified import VerifiedBlocks, VerifiedEntry
from sysmodel.arbitration import MMUArbitration
from sysmodel.errors import ConfigError
from sysmodel.execution import PNMExecution, PNMFigures
from sysmodel.hardware import PAPER_HARDWARE, with_overrides

PROVENANCE = {"sources_digest": "-", "bench": "tb.pnm_lane.bench", "rtl_module": "rtl.pnm_lane.lane"}


def lane(width: int, pairs_per_cycle: float = 1.0, clock: float = 1e9) -> VerifiedEntry:
    """A lane entry as the bench records it: latency 2 + 3·log2(width) + 1, MACs = pairs/cycle × width."""
    figures = {"latency_cycles": 2 + 3 * (width.bit_length() - 1) + 1, "operand_pairs_per_cycle": pairs_per_cycle,
               "macs_per_cycle": pairs_per_cycle * width}
    return VerifiedEntry("pnm_lane", {"width": width, "sublane_width": min(width, 128), "design_clock_hz": clock},
                         figures, PROVENANCE)


ARRAY = VerifiedEntry("pnm_array", {"width": 16, "sublane_width": 4, "lanes": 16, "design_clock_hz": 1e9},
                      {"latency_cycles": 15, "operand_pairs_per_cycle": 1.0, "macs_per_cycle": 256.0}, PROVENANCE)


# The vector unit at the paper preset's assumed width (128), so no scaling figure is needed.
VECTOR = VerifiedEntry("pnm_vector", {"width": 128},
                       {"latency_cycles_mul": 145, "elements_per_cycle_mul": 128.0}
                       | {f"{figure}_{op}": value for op in ("max", "add", "exp", "recip", "rsqrt", "silu", "gelu",
                                                             "softmax", "merge")
                          for figure, value in (("latency_cycles", 145), ("elements_per_cycle", 128.0))},
                       PROVENANCE)


def mmu(clock: float = 1e9) -> VerifiedEntry:
    """The MMU entry of the committed table (its figures, read without the freshness check) at `clock`."""
    entry = next(e for e in json.loads(basedie.verified.TABLE_PATH.read_text())["entries"]
                 if e["block"] == "mmu" and not e["params"]["out_of_order"])
    return VerifiedEntry("mmu", {**entry["params"], "design_clock_hz": clock}, entry["figures"], PROVENANCE)


def peak_flops(table: VerifiedBlocks, hardware=PAPER_HARDWARE) -> float:
    figures = PNMFigures.from_verified(table, hardware.pnm)
    return PNMExecution(hardware, None, figures, None).peak_flops


def test_the_papers_pnm_is_32_tflops_from_the_verified_lane() -> None:
    # 16 lanes × 1,024 MACs × 2 FLOPs × 1 GHz = 32.768e12 (DuoPD §6.1: "32 TFLOPS").
    assert peak_flops(VerifiedBlocks([lane(1024), ARRAY])) == 16 * 1024 * 2 * 1e9


def test_a_lane_at_half_an_operand_pair_per_cycle_halves_pnm_compute_exactly_once() -> None:
    full = peak_flops(VerifiedBlocks([lane(1024), ARRAY]))
    half = peak_flops(VerifiedBlocks([lane(1024, pairs_per_cycle=0.5), ARRAY]))
    assert half == full / 2 == 16 * 512 * 2 * 1e9  # not a quarter: the rate is in macs_per_cycle once


def test_figures_come_from_the_entry_the_hardware_names() -> None:
    table = VerifiedBlocks([lane(1024), lane(64), ARRAY])
    figures = PNMFigures.from_verified(table, with_overrides(PAPER_HARDWARE, {"pnm.lane_width": "64"}).pnm)
    assert (figures.lanes, figures.latency_cycles, figures.macs_per_cycle, figures.clock_hz) == (16, 21, 64.0, 1e9)


@pytest.mark.parametrize("override,wanted,command", [
    ({"pnm.lane_width": "32"}, "pnm_lane with width=32, design_clock_hz=1e+09",
     "basedie verify pnm_lane --param width=32 --param sublane_width=32"),
    ({"pnm.lanes": "32"}, "pnm_array with lanes=32, design_clock_hz=1e+09",
     "basedie verify pnm_array --param lanes=32 --param width=16 --param sublane_width=4"),
    ({"pnm.clock_hz": "2e9"}, "pnm_lane with width=1024, design_clock_hz=2e+09",
     "basedie verify pnm_lane --param width=1024 --param sublane_width=128 --param design_clock_hz=2e+09"),
])
def test_an_unverified_parameter_set_names_the_command_that_verifies_it(override: dict, wanted: str,
                                                                        command: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(f"no verified {wanted}; create it with `{command}`") + "$"):
        PNMFigures.from_verified(VerifiedBlocks([lane(1024), ARRAY]),
                                 with_overrides(PAPER_HARDWARE, override).pnm)


def test_the_mmu_converts_cycles_with_its_design_clock() -> None:
    loads = {"gpu": 0.0, "pnm": 0.0}
    at_1ghz = MMUArbitration.from_verified(VerifiedBlocks([mmu(1e9)]), "prefill-first", PAPER_HARDWARE)
    at_500mhz = MMUArbitration.from_verified(VerifiedBlocks([mmu(5e8)]), "prefill-first", PAPER_HARDWARE)
    # Idle: the PNM's path is its unloaded latency in cycles, 3 (README: latency_cycles_pnm).
    assert at_1ghz.access_latency_s("pnm", loads) == pytest.approx(3e-9)
    assert at_500mhz.access_latency_s("pnm", loads) == pytest.approx(6e-9)


SIMULATE = ["simulate", "--system", "duopd", "--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "16",
            "--requests", "4", "--no-plots"]


def test_simulate_runs_on_a_verified_width_and_refuses_an_unverified_one(tmp_path, monkeypatch, capsys) -> None:
    table = VerifiedBlocks([lane(1024), lane(64), ARRAY, VECTOR, mmu()])
    monkeypatch.setattr(basedie.verified, "load", lambda: table)
    out = tmp_path / "w64"
    # The synthesis table has no 64-wide lane: its power (the default source) is refused, the paper's is not.
    assert main([*SIMULATE, "--hw", "pnm.lane_width=64", "--out", str(out)]) == 2
    assert "`basedie synth pnm_lane --param width=64" in capsys.readouterr().err and not out.exists()
    assert main([*SIMULATE, "--hw", "pnm.lane_width=64", "--power-source", "paper", "--out", str(out)]) == 0
    used = json.loads((out / "config.json").read_text())["verified_blocks"]
    assert used["pnm_lane"]["params"]["width"] == 64 and used["pnm_array"]["params"]["lanes"] == 16
    assert used["pnm_vector"]["params"]["width"] == 128 and "fp32_add" not in used   # no scaling needed
    capsys.readouterr()
    assert main([*SIMULATE, "--hw", "pnm.lane_width=32", "--power-source", "paper", "--out", str(tmp_path / "w32")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "`basedie verify pnm_lane --param width=32 --param sublane_width=32`" in err
    assert not (tmp_path / "w32").exists()


def test_a_planted_vector_unit_latency_slows_duopds_decoding(tmp_path, monkeypatch) -> None:
    """The duopd system prices its vector work from the table: ten times the unit's latency, longer TPOT."""
    def tpot(latency: int) -> float:
        vector = VerifiedEntry("pnm_vector", VECTOR.params, {k: latency if k.startswith("latency") else v
                                                             for k, v in VECTOR.figures.items()}, PROVENANCE)
        monkeypatch.setattr(basedie.verified, "load", lambda: VerifiedBlocks([lane(1024), ARRAY, vector, mmu()]))
        out = tmp_path / str(latency)
        assert main([*SIMULATE, "--out", str(out)]) == 0
        return json.loads((out / "summary.json").read_text())["tpot_s"]["p50"]
    assert tpot(1450) > tpot(145)
