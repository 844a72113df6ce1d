"""sysmodel.power: the base die's power composed from synthesis-table entries, and a stale table refused."""
import json
from pathlib import Path

import pytest

from basedie.verified import StaleTableError, rtl_digest
from sysmodel import power
from sysmodel.hardware import DUPLEX_BANDWIDTH_COMPUTE, PAPER_HARDWARE, PAPER_PNM

MODULES = {"pnm_lane": "rtl.pnm_lane.lane", "pnm_vector": "rtl.pnm_vector.vector", "pnm_buffer": "rtl.pnm_buffer.buffer",
           "pnm_controller": "rtl.pnm_controller.controller", "mmu": "rtl.mmu.mmu", "dqb": "rtl.dqb.dqb"}


def _entry(block: str, params: dict, total_w: float, digest: str | None = None) -> dict:
    module = MODULES[block]
    return {"block": block, "params": params,
            "figures": {"power": {"total_w": total_w, "leakage_w": total_w / 10, "dynamic_w": total_w * 0.9,
                                  "toggle_rate": 0.2, "clock_hz": params.get("design_clock_hz", 1e9)}},
            "provenance": {"rtl_module": module, "rtl_digest": digest or rtl_digest(module),
                           "verilog_sha256": f"the Verilog of {block} {params}"}}


def _table(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "synthesized.json"
    path.write_text(json.dumps({"schema": power.SCHEMA, "entries": entries}))
    return path


def _pnm_entries() -> list[dict]:
    return [_entry("pnm_lane", {"width": 1024, "design_clock_hz": 1e9}, 0.25),
            _entry("pnm_lane", {"width": 2, "design_clock_hz": 1e9}, 0.001),
            _entry("pnm_vector", {"width": 2}, 0.01),
            _entry("pnm_buffer", {"total_bytes": 65536, "design_clock_hz": 1e9}, 0.3),
            _entry("pnm_controller", {"design_clock_hz": 1e9}, 0.02),
            _entry("mmu", {"out_of_order": False, "design_clock_hz": 1e9}, 0.05),
            _entry("dqb", {"interface_bits": 32, "rounding": "nearest_even", "design_clock_hz": 328e6}, 0.07),
            _entry("dqb", {"interface_bits": 32, "rounding": "toward_zero_ftz", "design_clock_hz": 328e6}, 0.06)]


def test_a_pnm_is_its_lanes_its_scaled_vector_unit_and_its_other_parts(tmp_path: Path) -> None:
    path = _table(tmp_path, _pnm_entries())
    # 16 lanes of 0.25 W, a 128-lane vector unit from a 2-lane one of 0.01 W, buffer, controller and MMU.
    assert power.pnm_power_w(16, 1024, 128, 1e9, path) == pytest.approx(16 * 0.25 + 64 * 0.01 + 0.3 + 0.02 + 0.05)
    # Table 5's DQB: the 2-lane, 32-bit DQB counted once per 32 bits of its 512-bit interface.
    assert power.dqb_power_w(path) == pytest.approx(16 * 0.07)


def test_a_missing_entry_names_the_command_that_synthesizes_it(tmp_path: Path) -> None:
    path = _table(tmp_path, [e for e in _pnm_entries() if e["block"] != "pnm_vector"])
    with pytest.raises(StaleTableError, match="basedie synth pnm_vector"):
        power.pnm_power_w(16, 1024, 128, 1e9, path)


def test_an_entry_synthesized_from_other_rtl_sources_is_refused(tmp_path: Path) -> None:
    entries = _pnm_entries()
    entries[-2] = _entry("dqb", entries[-2]["params"], 0.07, digest="from older sources")
    with pytest.raises(StaleTableError, match="basedie synth dqb"):
        power.dqb_power_w(_table(tmp_path, entries))


def test_a_pnms_power_records_each_entry_it_counts_and_how_often(tmp_path: Path) -> None:
    path = _table(tmp_path, _pnm_entries())
    pnm = power.pnm_power("synthesized", PAPER_PNM, path)
    assert pnm.watts == pytest.approx(power.pnm_power_w(16, 1024, 128, 1e9, path))
    counted = {(p["block"], p["count"]) for p in pnm.provenance}
    assert counted == {("pnm_lane", 16), ("pnm_vector", 64), ("pnm_buffer", 1), ("pnm_controller", 1), ("mmu", 1)}
    assert all(p["verilog_sha256"].startswith(f"the Verilog of {p['block']}") for p in pnm.provenance)


def test_the_paper_source_takes_the_papers_figures_without_the_table(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    assert power.pnm_power("paper", PAPER_PNM, missing).watts == 6.45
    assert power.dqb_power("paper", missing).watts == 0.355
    with pytest.raises(StaleTableError, match="basedie synth all"):
        power.dqb_power("synthesized", missing)


def test_duplexs_pnm_adds_its_tsv_power_and_its_64_lanes_under_either_source(tmp_path: Path) -> None:
    path = _table(tmp_path, _pnm_entries())
    duplex = DUPLEX_BANDWIDTH_COMPUTE.apply(PAPER_HARDWARE).pnm
    # 64 lanes of 0.25 W (4x compute); the vector unit, buffer, controller and MMU once; Duplex's TSV I/O raises
    # a stack from 41.6 W to 100.48 W (hardware.DUPLEX_BANDWIDTH).
    tsv = 100.48 - 41.6
    assert power.pnm_power("synthesized", duplex, path).watts == pytest.approx(
        64 * 0.25 + 64 * 0.01 + 0.3 + 0.02 + 0.05 + tsv)
    assert power.pnm_power("paper", duplex, path).watts == pytest.approx(6.45 + tsv)


def test_each_part_is_chosen_by_its_clock_and_parameters_among_others_of_the_same_block(tmp_path: Path) -> None:
    # The same blocks at another clock, buffer size and vector width: each part must be picked by all of them.
    others = [_entry("pnm_lane", {"width": 1024, "design_clock_hz": 2e9}, 0.5),
              _entry("pnm_vector", {"width": 4}, 0.03),
              _entry("pnm_buffer", {"total_bytes": 65536, "design_clock_hz": 2e9}, 0.6),
              _entry("pnm_buffer", {"total_bytes": 32768, "design_clock_hz": 1e9}, 0.15),
              _entry("pnm_controller", {"design_clock_hz": 2e9}, 0.04),
              _entry("mmu", {"out_of_order": False, "design_clock_hz": 2e9}, 0.1),
              _entry("mmu", {"out_of_order": True, "design_clock_hz": 1e9}, 0.07)]
    path = _table(tmp_path, _pnm_entries() + others)
    assert power.pnm_power_w(16, 1024, 128, 1e9, path) == pytest.approx(16 * 0.25 + 64 * 0.01 + 0.3 + 0.02 + 0.05)
    assert power.pnm_power_w(16, 1024, 128, 2e9, path) == pytest.approx(16 * 0.5 + 64 * 0.01 + 0.6 + 0.04 + 0.1)


def test_a_block_power_carries_every_figure_and_digest_of_its_entry(tmp_path: Path) -> None:
    path = _table(tmp_path, _pnm_entries())
    lane = power.block_power("pnm_lane", path, width=2)
    assert lane == power.SynthesizedPower(
        block="pnm_lane", params={"width": 2, "design_clock_hz": 1e9}, total_w=0.001, leakage_w=0.0001,
        dynamic_w=0.001 * 0.9, toggle_rate=0.2, clock_hz=1e9, verilog_sha256="the Verilog of pnm_lane "
        "{'width': 2, 'design_clock_hz': 1000000000.0}", rtl_digest=rtl_digest("rtl.pnm_lane.lane"))


def test_a_missing_or_ambiguous_entry_is_refused_in_one_line_naming_the_command(tmp_path: Path) -> None:
    path = _table(tmp_path, _pnm_entries())
    with pytest.raises(StaleTableError) as missing:
        power.block_power("pnm_vector", path, width=8)
    assert str(missing.value) == (f"{path}: no synthesized entries of pnm_vector with {{'width': 8}}; "
                                  "run `basedie synth pnm_vector --param width=8`")
    with pytest.raises(StaleTableError) as two:
        power.block_power("dqb", path)
    assert str(two.value) == f"{path}: 2 synthesized entries of dqb with any parameters; run `basedie synth dqb`"
    with pytest.raises(StaleTableError) as both:
        power.block_power("mmu", path, out_of_order=True, design_clock_hz=1e9)
    assert str(both.value) == (f"{path}: no synthesized entries of mmu with {{'out_of_order': True, "
                               "'design_clock_hz': 1000000000.0}; run `basedie synth mmu --param out_of_order=True "
                               "--param design_clock_hz=1000000000.0`")


def test_a_base_die_power_names_its_source_and_what_it_rests_on(tmp_path: Path) -> None:
    path = _table(tmp_path, _pnm_entries())
    duplex = DUPLEX_BANDWIDTH_COMPUTE.apply(PAPER_HARDWARE).pnm
    tsv = {"hardware": "pnm.tsv_power_w", "watts": pytest.approx(100.48 - 41.6)}
    paper = power.pnm_power("paper", PAPER_PNM, path)
    assert paper.as_dict() == {"watts": 6.45, "source": "paper",
                               "provenance": [{"hardware": "pnm.power_w", "paper": "DuoPD §6.7"}]}
    assert power.pnm_power("paper", duplex, path).provenance == (
        {"hardware": "pnm.power_w", "paper": "DuoPD §6.7"}, tsv)
    synthesized = power.pnm_power("synthesized", duplex, path)
    assert synthesized.source == "synthesized" and synthesized.provenance[-1] == tsv
    assert [p["block"] for p in synthesized.provenance[:-1]] == ["pnm_lane", "pnm_vector", "pnm_buffer",
                                                                 "pnm_controller", "mmu"]
    assert power.dqb_power("paper", path).as_dict() == {"watts": 0.355, "source": "paper",
                                                        "provenance": [{"paper": "StreamDQ Table 5"}]}
    dqb = power.dqb_power("synthesized", path)
    assert dqb.source == "synthesized" and [(p["block"], p["count"]) for p in dqb.provenance] == [("dqb", 16)]
