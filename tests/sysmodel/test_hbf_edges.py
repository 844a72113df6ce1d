"""The HBF modules' edges checked against numbers worked out by hand (issue 19's mutation testing found these
unchecked)."""
import math

import numpy as np
import pytest

from sysmodel.errors import ConfigError
from sysmodel.hbf.media import HBFStack, page_reads
from sysmodel.hbf.retention import BOLTZMANN_EV, Retention, lifetime_years, retention_s
from sysmodel.hbf.thermal import PackageRC

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


def test_a_package_without_resistance_or_capacitance_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        PackageRC(capacitance=(60.0, 0.0, 5.0))
    assert str(error.value) == "thermal resistances and capacitances must be > 0"
