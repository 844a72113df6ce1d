"""The HBF modules' edges checked against numbers worked out by hand (issue 19's mutation testing found these
unchecked)."""
import dataclasses
import math
import pathlib
import tomllib

import numpy as np
import pytest

from sysmodel.engine import EventLoop
from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.hbf.cache import FrameCache, LayerLRU
from sysmodel.hbf.layout import GIB, PRESETS as LAYOUTS, Layout, objects, resolve_layout
from sysmodel.llm import LLAMA2_70B, QWEN3_235B_A22B
from sysmodel.operators import Shard, decode_work
from sysmodel.hbf.media import HBFStack, page_reads
from sysmodel.hbf.package import Package, Refresh
from sysmodel.hbf.retention import BOLTZMANN_EV, Retention, lifetime_years, retention_s
from sysmodel.hbf.routing import Router, RoutingModel, TraceRouter, load_trace
from sysmodel.hbf.service import HBFOptions, HBFTier, PortPower
from sysmodel.hbf.thermal import PackageRC, Thermal, Throttle

DAY = 24 * 3600.0


# ----- retention ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("temp_c", [-273.15, -273.5])
def test_retention_refuses_temperatures_at_or_below_absolute_zero(temp_c: float) -> None:
    with pytest.raises(ConfigError) as error:
        retention_s(temp_c)
    assert str(error.value) == f"temperature must be above absolute zero, got {temp_c} C"


@pytest.mark.parametrize(("initial", "zones"), [([0.0, 1.0], 2), ([0.0, 1.5], 2), ([-0.1, 0.5], 2),
                                                ([0.2, 0.5], 3)])
def test_initial_damage_is_one_value_in_0_to_1_per_zone(initial: list, zones: int) -> None:
    with pytest.raises(ConfigError) as error:
        Retention(zones, np.array(initial))
    assert str(error.value) == "retention: initial damage must be one value in [0, 1) per zone"


def test_zones_are_refreshed_each_time_their_damage_crosses_a_whole_number() -> None:
    # Zones written with damage 0.1, 0.5 and 0.8; at 85 C a day of damage per day. Fresh: nothing aged, nothing
    # refreshed; the first deadline is the 0.8 zone's, 0.2 days away.
    zones = Retention(3, np.array([0.5, 0.8, 0.1]))
    assert (zones.aging, zones.refreshed) == (0.0, 0)
    assert zones.damage.tolist() == [0.1, 0.5, 0.8]
    assert zones._next(0.0) == pytest.approx(0.2, rel=1e-12, abs=0)
    # 0.3 days: the 0.8 zone crosses 1 (at 0.2).
    assert zones.advance(0.3 * DAY, 85.0) == 1
    # To 1.6 days: the 0.8 zone again (1.2), the 0.5 zone twice (0.5, 1.5), the 0.1 zone once (0.9): 4 more.
    assert zones.advance(1.3 * DAY, 85.0) == 4 and zones.refreshed == 5
    # The next deadline, at 1.9 days, is the 0.1 zone's second; when all three have crossed this whole number
    # (past 1.95), it is the 0.8 zone's third, at 2.2.
    assert zones._next(1.6) == pytest.approx(1.9, rel=1e-12, abs=0)
    assert zones._next(1.95) == pytest.approx(2.2, rel=1e-12, abs=0)
    assert zones.advance(0.29 * DAY, 85.0) == 0 and zones.advance(0.02 * DAY, 85.0) == 1


def test_a_zone_whose_damage_reaches_exactly_one_is_refreshed_in_that_step() -> None:
    zone = Retention(1, np.array([0.5]))
    assert zone.advance(0.5 * DAY, 85.0) == 1          # 43,200 s at 1/86,400 per s: exactly 0.5


def test_the_activation_energy_sets_how_fast_a_hot_zone_ages() -> None:
    # Ea = 0.5 eV at 95 C: retention 24 h · exp(0.5 / k · (1/368.15 − 1/358.15)) (shorter than 24 h); a zone
    # written at 0 crosses 1 after exactly that long.
    hot = 24 * 3600 * math.exp(0.5 / BOLTZMANN_EV * (1 / 368.15 - 1 / 358.15))
    assert retention_s(95.0, 0.5) == pytest.approx(hot, rel=1e-12, abs=0)
    zone = Retention(1, activation_ev=0.5)
    assert zone.advance(0.999 * hot, 95.0) == 0 and zone.advance(0.002 * hot, 95.0) == 1


def test_lifetime_is_the_endurance_over_the_write_rate() -> None:
    # 3,000 P/E cycles of 512 GB written at 1 GB/s: 1.536e6 s, over a year of 365.25 days.
    assert lifetime_years(3000, 512e9, 1e9) == pytest.approx(1.536e6 / (365.25 * DAY), rel=1e-12, abs=0)
    assert lifetime_years(1, 1.0, 0.5) == pytest.approx(2 / (365.25 * DAY), rel=1e-12, abs=0)
    with pytest.raises(ConfigError) as error:
        lifetime_years(3000, 512e9, 0.0)
    assert str(error.value) == "write rate must be > 0 bytes/s"


# ----- media --------------------------------------------------------------------------------------------
NONNEGATIVE = "HBF program/erase times and energies must be >= 0"
POSITIVE = "HBF capacity, outstanding reads, block size, endurance must be > 0"


@pytest.mark.parametrize(("field", "refused", "message"), [
    ("grade", 4, "HBF grade must be one of 1, 2, 3, got 4"),
    ("read_s", 0.0, "HBF page read time must be > 0 s, got 0.0"),
    ("program_s", -1e-6, NONNEGATIVE), ("erase_s", -1e-3, NONNEGATIVE),
    ("read_energy_per_byte", -1e-12, NONNEGATIVE), ("program_energy_per_byte", -1e-12, NONNEGATIVE),
    ("capacity_bytes", 0.0, POSITIVE), ("outstanding_reads", 0, POSITIVE), ("pages_per_block", 0, POSITIVE),
    ("endurance_cycles", 0, POSITIVE),
])
def test_an_hbf_stack_refuses_each_impossible_figure(field: str, refused, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        HBFStack(**{field: refused})
    assert str(error.value) == message


def test_an_hbf_stack_accepts_the_least_of_each_figure() -> None:
    least = HBFStack(read_s=1e-9, program_s=0.0, erase_s=0.0, read_energy_per_byte=0.0, program_energy_per_byte=0.0,
                     capacity_bytes=0.5, outstanding_reads=1, pages_per_block=1, endurance_cycles=1)
    # One outstanding 4 KiB read every nanosecond: 4.096 TB/s of media, above grade 1's 384 GB/s interface.
    tier = least.tier()
    assert (tier.name, tier.capacity_bytes, tier.bandwidth, tier.latency_s) == ("HBF stack (grade 1)", 0.5, 384e9,
                                                                               1e-9)


def test_a_read_of_one_byte_is_one_64_byte_step_and_negative_reads_are_refused() -> None:
    assert page_reads(100, 1) == [(0, 64, 64)]
    for address, nbytes in [(-64, 64), (0, -1)]:
        with pytest.raises(ConfigError) as error:
            page_reads(address, nbytes)
        assert str(error.value) == "HBF reads need a non-negative address and length"


# ----- thermal ------------------------------------------------------------------------------------------
def test_the_conductance_matrix_couples_each_pair_of_dies_once() -> None:
    # 1 K/W from each die to the coolant; 1, 2 and 4 K/W between gpu-hbm, gpu-hbf and hbm-hbf.
    rc = PackageRC(to_coolant=(1.0, 1.0, 1.0), coupling=(1.0, 2.0, 4.0))
    np.testing.assert_array_equal(rc.conductance(), [[1 + 1 + 0.5, -1, -0.5],
                                                     [-1, 1 + 1 + 0.25, -0.25],
                                                     [-0.5, -0.25, 1 + 0.5 + 0.25]])


def _one_rc_per_die(temps: list, dt, power, rc: PackageRC, ambient: float) -> np.ndarray:
    """Each decoupled die by hand: T' = T_inf + (T - T_inf) exp(-dt / RC), T_inf = ambient + P R, per step."""
    out = []
    for step, watts in zip(dt, power):
        temps = [ambient + p * r + (t - ambient - p * r) * math.exp(-step / (r * c))
                 for t, p, r, c in zip(temps, watts, rc.to_coolant, rc.capacitance)]
        out.append(temps)
    return np.array(out)


@pytest.mark.parametrize("dt", [[0.7], [1.0, 2000.0], list(np.linspace(0.5, 1.5, 7)), [1.0] * 3000])
def test_a_run_of_steps_is_each_die_relaxing_to_its_steady_temperature_step_by_step(dt: list) -> None:
    # Decoupled dies (1e12 K/W between them): time constants R C = 1.8, 1.5 and 3 s. `run` takes the steps in
    # runs of < 600 time constants of the fastest die (exp(-745) underflows): 3,000 steps of 1 s are 2,000 of
    # them (four runs), a step of 2,000 s alone 1,333; one step takes a path of its own.
    rc = PackageRC(coupling=(1e12, 1e12, 1e12))
    dt = np.array(dt)
    rng = np.random.default_rng(len(dt))
    power = rng.uniform(0.0, [1000.0, 100.0, 20.0], (len(dt), 3))
    thermal = Thermal(rc, 45.0)
    thermal.step(2.0, (500.0, 50.0, 10.0))              # start away from ambient
    start = thermal.temps.tolist()
    expected = _one_rc_per_die(start, dt, power, rc, 45.0)
    got = thermal.run(dt, power)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    assert thermal.temps.tolist() == start               # `run` leaves the state alone


@pytest.mark.parametrize(("state", "temps", "first"), [
    (0, [70.0, 79.9, 80.0, 95.0], 2),          # normal: enters light at 80 C
    (0, [70.0, 79.9], 2),                      # none leaves: the length
    (1, [85.0, 79.0, 78.0], 2),                # light: leaves at <= 78 C
    (1, [85.0, 90.0, 78.0], 1),                # ... or enters severe at 90 C
    (2, [95.0, 85.0, 80.5, 80.0], 3),          # severe: leaves at <= 80 C
    (2, [99.0, 100.0, 80.0], 1),               # ... or enters shutdown at 100 C
    (3, [120.0, 81.0, 80.0], 2),               # shutdown: nothing above it, leaves at <= 80 C
    (3, [120.0, 81.0], 2),
])
def test_the_first_temperature_that_changes_the_throttle_state(state: int, temps: list, first: int) -> None:
    assert Throttle(state=state).first_change(np.array(temps)) == first
    throttle = Throttle(state=state)            # the state `update` leaves first at that temperature
    changed = [i for i, t in enumerate(temps) if throttle.update(t) != state]
    assert (changed or [len(temps)])[0] == first


def test_a_package_without_resistance_or_capacitance_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        PackageRC(capacitance=(60.0, 0.0, 5.0))
    assert str(error.value) == "thermal resistances and capacitances must be > 0"


# ----- package ------------------------------------------------------------------------------------------
# Decoupled dies (1e12 K/W between them) under no power but the HBF die's: its time constant is 0.6 K/W x 5 J/K
# = 3 s. One zone started at damage 0.5, retention 24 h at any temperature (no activation energy): it is
# refreshed 12 h in. A refresh moves 1 GB at 10 GB/s and programs for 0.5 s (0.6 s of the channels), wears 10
# blocks and releases 1 J.
DECOUPLED = PackageRC(coupling=(1e12, 1e12, 1e12))
ZONE = Refresh(zone_bytes=1e9, zone_blocks=10, zone_program_s=0.5, energy_per_byte=1e-9)


def _package() -> Package:
    return Package(DECOUPLED, 45.0, Retention(1, np.array([0.5]), activation_ev=0.0), ZONE, bandwidth=1e10)


def test_a_zone_at_its_deadline_is_refreshed_taking_channel_time_and_heating_the_next_step() -> None:
    package = _package()                    # the dies stay at 45 C
    steps = np.full(20, 4320.0)             # 1.2 h each: the deadline falls at the end of the 10th
    assert package.run(steps, np.zeros((20, 3)), stop=True) == 10
    assert package.counters == {"refresh_read_bytes": 1e9, "programmed_bytes": 1e9, "pe_block_cycles": 10,
                                "refreshed_zones": 1}
    assert package.rate == pytest.approx(1e10 * (1 - 0.6 / 4320), rel=1e-12)
    assert package.clock == pytest.approx(43200.0, rel=1e-12) and len(package.trace) == 10
    package.step(0.0, (0.0, 0.0, 0.0))      # a step of no time releases none of the refresh's 1 J
    assert package.refresh_heat_j == 1.0 and package.thermal.temps.tolist() == [45.0, 45.0, 45.0]
    package.step(2.0, (100.0, 10.0, 0.0))   # the refresh's 1 J over the next 2 s: 0.5 W more into the HBF die
    np.testing.assert_allclose(package.thermal.temps, [45.0 + 100 * 0.03 * (1 - math.exp(-2 / 1.8)),
                                                       45.0 + 10 * 0.15 * (1 - math.exp(-2 / 1.5)),
                                                       45.0 + 0.5 * 0.6 * (1 - math.exp(-2 / 3))], rtol=1e-12)
    assert package.rate == 1e10 and package.refresh_heat_j == 0.0
    assert package.residency == [pytest.approx(43202.0, rel=1e-12), 0.0, 0.0, 0.0]
    # The next deadline a whole lifetime (24 h) after the first: the 20th step of 1.2 h; the counts add up.
    assert package.run(steps, np.zeros((20, 3)), stop=True) == 20
    assert package.counters == {"refresh_read_bytes": 2e9, "programmed_bytes": 2e9, "pe_block_cycles": 20,
                                "refreshed_zones": 2}
    # A run of steps after a refresh: its first step takes the 1 J (the die reaches 45 + 1 J / 4,320 s x 0.6 K/W)
    # and the channels; the next ones neither.
    package.run(np.full(10, 4320.0), np.zeros((10, 3)))
    assert package.trace[-10][3] == pytest.approx(45.0 + 0.6 / 4320, rel=1e-12)
    assert package.trace[-9][3] == pytest.approx(45.0, rel=1e-12) and package.rate == 1e10


def test_a_refresh_longer_than_its_step_leaves_the_channels_one_percent() -> None:
    package = _package()
    package.step(43200.0 - 0.3, (0.0, 0.0, 0.0))
    assert package.rate == 1e10
    package.step(0.3, (0.0, 0.0, 0.0))      # meets the deadline: 0.6 s of refresh in a step of 0.3 s
    assert package.counters["refreshed_zones"] == 1 and package.rate == pytest.approx(1e8, rel=1e-9)


def test_a_refresh_that_releases_no_heat_still_gives_the_channels_back_after_its_step() -> None:
    package = Package(DECOUPLED, 45.0, Retention(1, np.array([0.5]), activation_ev=0.0),
                      dataclasses.replace(ZONE, energy_per_byte=0.0), bandwidth=1e10)
    assert package.run(np.full(20, 4320.0), np.zeros((20, 3)), stop=True) == 10
    assert package.refresh_heat_j == 0.0 and package.rate < 1e10
    package.run(np.full(10, 4320.0), np.zeros((10, 3)))
    assert package.rate == 1e10


def test_a_heating_package_throttles_in_the_step_that_crosses_each_threshold() -> None:
    # 100 W into the HBF die from 45 C: 45 + 60 (1 - exp(-t / 3 s)) C crosses 80 C at t = 3 ln(60 / 25) = 2.63 s,
    # 90 C at 3 ln 4 = 4.16 s, 100 C at 3 ln 12 = 7.45 s; steps of 0.1 s.
    power = np.tile([0.0, 0.0, 100.0], (100, 1))
    stopped = _package()
    assert stopped.run(np.full(100, 0.1), power, stop=True) == 27
    assert stopped.throttle.state == 1 and stopped.rate == pytest.approx(0.9e10)
    assert stopped.clock == pytest.approx(2.7, rel=1e-12)
    few = _package()                         # 8 steps or fewer are taken one by one: 80 C is crossed in the 3rd
    assert few.run(np.full(5, 1.0), power[:5], stop=True) == 3 and few.throttle.state == 1
    queued = _package()
    assert queued.run(np.full(100, 0.1), power) == 100
    assert queued.clock == pytest.approx(10.0, rel=1e-12)
    assert queued.rate == 0.0 and queued.throttle.state == 3
    assert queued.residency == pytest.approx([2.7, 4.2 - 2.7, 7.5 - 4.2, 10 - 7.5], rel=1e-9)
    assert [state for *_, state in queued.trace[24:27]] == [0, 0, 1]   # after 2.5, 2.6, 2.7 s


def test_a_package_restored_from_a_snapshot_is_where_it_was() -> None:
    package = _package()
    package.run(np.full(12, 4320.0), np.tile([0.0, 0.0, 5.0], (12, 1)))     # 14.4 h: one refresh
    saved, trace = package.snapshot(), list(package.trace)
    temps, counters = package.thermal.temps.copy(), dict(package.counters)
    package.run(np.full(30, 4320.0), np.tile([0.0, 0.0, 50.0], (30, 1)))
    package.flush()
    assert package.counters != counters
    package.restore(saved)
    assert package.thermal.temps.tolist() == temps.tolist() and package.counters == counters
    assert package.trace == trace and package.clock == trace[-1][0]
    assert package.retention.aging == pytest.approx(0.6) and package.retention.refreshed == 1
    assert package.residency == [pytest.approx(12 * 4320.0), 0.0, 0.0, 0.0]


# ----- layout -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("fields", "message"), [
    ({"hbm_stacks": True}, "layout x: hbm_stacks must be a whole number >= 0, got True"),
    ({"hbf_stacks": -1}, "layout x: hbf_stacks must be a whole number >= 0, got -1"),
    ({"hbm_stack_gib": True}, "layout x: hbm_stack_gib must be a finite number >= 0, got True"),
    ({"frame_cache_gib": math.inf}, "layout x: frame_cache_gib must be a finite number >= 0, got inf"),
    ({"hbm_stacks": 0}, "layout x: needs at least one HBM stack"),
    ({"hbm_stack_gib": 0.0}, "layout x: needs at least one HBM stack"),
    ({"hbf_stacks": 1, "hbf_stack_gib": 0.0, "weights": "hbf"},
     "layout x: weights placed in HBF but the package has no HBF stack"),
    ({"hbm_stack_gib": 10.0, "frame_cache_gib": 8.0, "kv_frame_cache_gib": 8.0},
     "layout x: frame cache of 16 GiB does not fit in 10 GiB of HBM"),
    ({"hbm_stack_gib": 10.0, "frame_cache_gib": 10.0}, "layout x: frame cache of 10 GiB does not fit in 10 GiB of HBM"),
])
def test_a_layout_refuses_each_impossible_field_by_name(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        Layout("x", **{"hbm_stacks": 1, **fields})
    assert str(error.value) == message


def test_a_layout_accepts_the_least_of_each_field() -> None:
    least = Layout("x", hbm_stacks=1, hbm_stack_gib=0.5, hbf_stacks=1, hbf_stack_gib=0.5, weights="hbf")
    assert least.hbm_bytes == 0.5 * GIB and least.hbf_bytes == 0.5 * GIB


def test_a_layouts_gpu_has_its_hbm_stacks_of_its_size() -> None:
    hardware = Layout("x", hbm_stacks=3, hbm_stack_gib=36.0).hardware(PAPER_HARDWARE)
    stack = hardware.gpu.stack
    assert (hardware.gpu.stacks, stack.name, stack.capacity_bytes, stack.bandwidth) == (3, "HBM4 stack (36 GiB)",
                                                                                         36 * GIB, 2e12)


# LLaMA2-70B at TP8, per GPU: a layer's attention 8,192 × (2·8 + 2·1) × 128 × 2 B = 37,748,736 B and MLP
# 3 × 8,192 × 28,672 / 8 × 2 B = 176,160,768 B; Qwen3-235B-A22B at EP8: 16 of its 128 experts in each of 94
# layers, 3 × 4,096 × 1,536 × 2 B = 37,748,736 B each.
def test_the_hbf_objects_are_a_dense_models_layers_or_an_moe_models_local_experts() -> None:
    assert objects(Shard(LLAMA2_70B, 8)) == (80, 1, 37748736.0 + 176160768.0)
    assert objects(Shard(QWEN3_235B_A22B, 8)) == (94, 16, 37748736.0)


def test_what_a_layout_keeps_in_hbm_and_in_hbf() -> None:
    shard = Shard(LLAMA2_70B, 8)
    in_hbf = 80 * (37748736 + 176160768)
    hbf = Layout("x", hbm_stacks=3, hbf_stacks=1, weights="hbf", frame_cache_gib=8.0, kv_frame_cache_gib=2.0)
    assert hbf.hbf_weight_bytes(shard) == in_hbf
    assert hbf.hbm_resident_bytes(shard) == shard.weight_bytes - in_hbf + 10 * GIB
    hbm = Layout("x", hbm_stacks=3)
    assert (hbm.hbf_weight_bytes(shard), hbm.hbm_resident_bytes(shard)) == (0.0, shard.weight_bytes)


def test_a_model_fits_a_layout_that_holds_it_exactly_in_hbf_but_not_in_hbm() -> None:
    shard = Shard(LLAMA2_70B, 8)
    in_hbf = 80 * (37748736 + 176160768)
    resident = shard.weight_bytes - in_hbf
    exact_hbf = Layout("x", hbm_stacks=1, hbm_stack_gib=2 * resident / GIB, hbf_stacks=1, hbf_stack_gib=in_hbf / GIB,
                       weights="hbf")
    exact_hbf.check(shard)
    exact_hbm = dataclasses.replace(exact_hbf, name="y", hbm_stack_gib=resident / GIB)
    with pytest.raises(ConfigError) as error:
        exact_hbm.check(shard)
    assert str(error.value) == (f"LLaMA2-70B does not fit layout y: {resident / GIB:.1f} GiB for HBM (of "
                                f"{resident / GIB:g}) and {in_hbf / GIB:.1f} GiB for HBF (of {in_hbf / GIB:g}) "
                                f"per GPU at TP=8")


def test_a_layout_spec_is_refused_with_what_is_wrong(tmp_path, monkeypatch) -> None:
    def refused(spec: str) -> str:
        with pytest.raises(ConfigError) as error:
            resolve_layout(spec)
        return str(error.value)
    assert refused("nonesuch") == "unknown memory layout 'nonesuch': not hbm, A, B, C or a .toml/.json file"
    broken = tmp_path / "broken.toml"
    broken.write_text("hbm_stacks = [1,\n")
    with pytest.raises(tomllib.TOMLDecodeError) as parse:
        tomllib.loads(broken.read_text())
    assert refused(str(broken)) == f"{broken}: malformed layout file ({str(parse.value).splitlines()[0]})"
    keys = tmp_path / "keys.json"
    keys.write_text('{"hbm_stacks": 2, "zeta": 1, "alpha": 2}')
    known = ", ".join(sorted(f.name for f in dataclasses.fields(Layout)))
    assert refused(str(keys)) == f"{keys}: unknown layout key(s) alpha, zeta (known: {known})"
    missing = tmp_path / "missing.json"
    missing.write_text('{"hbf_stacks": 2}')
    assert refused(str(missing)) == f"{missing}: layout needs hbm_stacks"

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(pathlib.Path, "read_text", denied)
    assert refused(str(missing)) == f"{missing}: cannot be read (Permission denied)"


# ----- cache --------------------------------------------------------------------------------------------
def test_a_one_frame_cache_holds_one_frame_and_no_cache_writes_through() -> None:
    one = FrameCache(1)
    assert not one.read(5) and one.read(5) and (one.hits, one.misses) == (1, 1)
    none = FrameCache(0)
    assert not none.write(5) and not none.read(5) and none.written_back == [5]
    for cache in (FrameCache, lambda capacity: LayerLRU(2, 2, capacity)):
        with pytest.raises(ConfigError, match="^frame cache capacity must be >= 0 (frames|objects), got -1$"):
            cache(-1)


def test_an_empty_block_touches_nothing() -> None:
    lru = LayerLRU(2, 3, 4)
    assert lru.access_block(np.zeros((0, 2, 3), dtype=bool)).shape == (0, 2, 3)
    assert lru.iteration == 0
    # Nothing touched yet: every object's last touch is "never" (-1), and the recency order is the index order
    # (never-touched objects first, in index order), as `last` and `order` promise.
    np.testing.assert_array_equal(lru.last, np.full(6, -1))
    np.testing.assert_array_equal(lru.order, np.arange(6))


@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 12, 20, 31])
def test_blocks_of_iterations_hit_as_the_reference_cache_does(capacity: int) -> None:
    # Blocks of 1 to 4 iterations over 5 layers of 6 objects, with many and few objects touched, against the
    # page-by-page reference: a layer looked up as a whole, then its objects read in order.
    layers, slots = 5, 6
    rng = np.random.default_rng(100 + capacity)
    fast, reference = LayerLRU(layers, slots, capacity), FrameCache(capacity)
    for step in range(80):
        masks = rng.random((rng.integers(1, 5), layers, slots)) < rng.choice([0.05, 0.2, 0.5, 0.9])
        got = fast.access_block(masks)
        for i, mask in enumerate(masks):
            for layer in range(layers):
                frames = [layer * slots + s for s in np.flatnonzero(mask[layer])]
                expected = [reference.contains(f) for f in frames]
                for frame in frames:
                    reference.read(frame)
                assert got[i, layer, mask[layer]].tolist() == expected, (step, i, layer)
        assert not got[~masks].any()


# ----- service ------------------------------------------------------------------------------------------
def test_a_block_cut_before_its_first_iteration_ends_keeps_none_of_them() -> None:
    # Layout B (LLaMA2-70B's layers in HBF behind an 8 GiB frame cache): a block of three decode iterations is
    # priced at t = 0, then the same port asks again at t = 0 (its server cut the block): no iteration ran, so
    # the frame cache is as before the block (an empty replay used to fail: numpy cannot reshape no iterations to
    # (0, -1)).
    layout = LAYOUTS["B"]
    hardware = layout.hardware(PAPER_HARDWARE)
    shard = Shard(LLAMA2_70B, 8)
    tier = HBFTier(EventLoop(), shard, layout, HBFOptions())
    port = tier.port(GPUExecution(hardware, shard), "gpu", PortPower((0.0, 0.0, 0.0), 0.0))
    first = port.cost(decode_work(1, 100 + np.arange(3)))
    tier.settle(0.0, asking=port)
    assert tier.lru.iteration == 0 and not tier.lru.seen.any()
    again = port.cost(decode_work(1, 100 + np.arange(3)))
    np.testing.assert_array_equal(again.seconds, first.seconds)


# ----- routing ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("experts", "top_k", "skew", "message"), [
    (8, 0, 0.0, "routing: top_k must be in 1..8, got 0"), (8, 9, 0.0, "routing: top_k must be in 1..8, got 9"),
    (8, 2, -0.1, "routing skew must be >= 0, got -0.1"),
])
def test_a_routing_model_refuses_impossible_choices(experts: int, top_k: int, skew: float, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        RoutingModel(experts, top_k, skew)
    assert str(error.value) == message


def test_zipf_weights_rank_the_experts() -> None:
    # Skew 1 over 4 experts: weights 1, 1/2, 1/3, 1/4 of their sum 25/12.
    router = Router(RoutingModel(4, 1, 1.0), 1)
    np.testing.assert_allclose(np.exp(router.log_weights), [12 / 25, 6 / 25, 4 / 25, 3 / 25], rtol=1e-12)
    # One pick per token (the Gumbel-max trick): rank r with probability its weight. Estimated from 20,000
    # tokens, each within 0.015 (over four standard errors).
    by_rank = np.take_along_axis(router.inclusion, router.ranking, axis=1)[0]
    np.testing.assert_allclose(by_rank, [12 / 25, 6 / 25, 4 / 25, 3 / 25], atol=0.015)
    # 64 experts: rank r with probability 1 / ((r + 1) H_64), H_64 = 1 + 1/2 + … + 1/64 = 4.744.
    harmonic = sum(1 / (r + 1) for r in range(64))
    wide = Router(RoutingModel(64, 1, 1.0), 1)
    by_rank = np.take_along_axis(wide.inclusion, wide.ranking, axis=1)[0]
    np.testing.assert_allclose(by_rank[:4], [1 / ((r + 1) * harmonic) for r in range(4)], atol=0.015)
    # Uniform routing: every expert is picked by a token with probability top_k / experts, exactly.
    np.testing.assert_array_equal(Router(RoutingModel(8, 2, 0.0), 3).inclusion, np.full((3, 8), 0.25))


@pytest.mark.parametrize("top_k", [1, 4])
def test_popular_experts_are_picked_more_and_top_k_picks_the_largest_keys(top_k: int) -> None:
    # Skew 8 over 4 experts: the most popular expert carries 1 / (1 + 2^-8 + 3^-8 + 4^-8) = 99.6 % of the weight,
    # so a single pick is almost always it; with top_k = experts every expert is picked by every token.
    router = Router(RoutingModel(4, top_k, 8.0), 2)
    by_rank = np.take_along_axis(router.inclusion, router.ranking, axis=1)      # inclusion of rank 0, 1, 2, 3
    if top_k == 1:
        assert (by_rank[:, 0] > 0.99).all() and (by_rank[:, 3] < 0.01).all()
    else:
        np.testing.assert_array_equal(by_rank, np.ones((2, 4)))
    # An expert too unpopular to be drawn in the estimate is never touched.
    rare = Router(RoutingModel(64, 1, 8.0), 1)
    assert rare.inclusion.min() == 0.0 and rare.inclusion.shape == (1, 64)


def test_each_token_picks_the_top_k_experts_of_its_perturbed_weights() -> None:
    # Gumbel top-k: the k largest of log weight + Gumbel noise, the noise drawn from the router's generator.
    router = Router(RoutingModel(16, 3, 1.0, seed=5), 1)
    noise = np.random.default_rng()
    noise.bit_generator.state = router.state()
    keys = router.log_weights + noise.gumbel(size=(50, 16))
    expected = router.ranking[0][np.argsort(-keys, axis=1)[:, :3]]
    np.testing.assert_array_equal(np.sort(router.choices(50)[0], axis=1), np.sort(expected, axis=1))


def test_a_batch_touches_each_expert_with_one_minus_the_chance_no_token_picks_it() -> None:
    # Uniform routing over 4 experts, 1 pick per token: one token touches an expert with probability 1/4, two
    # with 1 − (3/4)² = 7/16. Over 20,000 layers the touched fractions are within 2 % of these.
    router = Router(RoutingModel(4, 1, 0.0), 20000)
    assert router.touched(1).mean() == pytest.approx(0.25, rel=0.02)
    assert router.touched(2).mean() == pytest.approx(7 / 16, rel=0.02)


# A trace of 3 tokens over 2 layers of 8 experts: token t picks expert t in both layers.
TRACE = np.stack([np.eye(8, dtype=bool)[[t, t]] for t in range(3)])


@pytest.mark.parametrize("router", [Router(RoutingModel(8, 2, 0.0), 2), TraceRouter(TRACE)])
def test_a_block_of_batches_touches_a_slice_of_the_experts(router) -> None:
    # Batches of 1 and 3 tokens, experts 2..5 only: iterations x 2 layers x 4; no batches: none.
    assert router.touched_block(np.array([1, 3]), slice(2, 6)).shape == (2, 2, 4)
    empty = router.touched_block(np.array([], dtype=np.int64), slice(2, 6))
    assert empty.shape == (0, 2, 4) and empty.dtype == bool


def test_a_routing_trace_that_cannot_be_read_names_why(tmp_path) -> None:
    with pytest.raises(ConfigError) as error:
        load_trace(tmp_path, 1, 4, 1)                      # a directory
    assert str(error.value) == f"{tmp_path}: routing trace cannot be read (Is a directory)"
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe[[0]]\n")
    with pytest.raises(ConfigError) as error:
        load_trace(binary, 1, 4, 1)
    reason = "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    assert str(error.value) == f"{binary}: routing trace cannot be read ({reason})"
    good = tmp_path / "good.jsonl"
    good.write_text("[[0, 2]]\n[[1, 2]]\n")
    picks = load_trace(good, 1, 4, 2)
    assert picks.dtype == bool and picks.tolist() == [[[True, False, True, False]], [[False, True, True, False]]]
