"""sysmodel.hardware: each check's boundary accepted and the value past it refused in one line, the what-if
scales, the `--hw` overrides' refusals, and the derived figures (the SM curve, the stacks' memory, MC requests)."""
from dataclasses import replace

import pytest

from sysmodel.errors import ConfigError
from sysmodel.hardware import (B200_SM_BANDWIDTH, DUPLEX_BANDWIDTH, DUPLEX_BANDWIDTH_COMPUTE, HBM4_MC,
                               PAPER_GPU, PAPER_HARDWARE, PNMScale, with_overrides)

POWERS = "hardware: powers, energies and latencies must be >= 0"
# (field, the boundary value accepted, a value past it, the refusal)
CHECKS = [
    ("gpus", "1", "0", "hardware: gpus must be >= 1"),
    ("gpu.flops", "1", "0", "hardware: GPU flops must be > 0"),
    ("gpu.stacks", "1", "0", "hardware: GPU stacks must be >= 1"),
    ("link.bandwidth", "1", "0", "hardware: link bandwidth must be > 0 bytes/s"),
    ("network.bandwidth", "1", "0", "hardware: network bandwidth must be > 0 bytes/s"),
    ("gpus_per_server", "1", "0", "hardware: gpus_per_server must be >= 1"),
    ("link.hop_latency_s", "0", "-1e-9", "hardware: link latencies must be >= 0"),
    ("network.hop_latency_s", "0", "-1e-9", "hardware: link latencies must be >= 0"),
    ("pnm.lanes", "1", "0", "hardware: PNM lanes and clock must be > 0"),
    ("pnm.clock_hz", "1", "0", "hardware: PNM lanes and clock must be > 0"),
    ("gpu.sms", "1", "0", "hardware: GPU sms must be >= 1"),
    ("mc.request_bytes", "1", "0", "hardware: memory controller request size and ports must be > 0"),
    ("mc.ports", "1", "0", "hardware: memory controller request size and ports must be > 0"),
    ("gpu.power_w", "0", "-1", POWERS),
    ("pnm.power_w", "0", "-1", POWERS),
    ("pnm.tsv_power_w", "0", "-1", POWERS),
    ("pnm.all_reduce_s", "0", "-1e-9", POWERS),
    ("link.energy_per_bit", "0", "-1e-12", POWERS),
    ("pnm_hbm_energy_saving", "0", "-0.01", "hardware: pnm_hbm_energy_saving must be in [0, 1)"),
    ("pnm_hbm_energy_saving", "0.99", "1", "hardware: pnm_hbm_energy_saving must be in [0, 1)"),
    ("pnm.bandwidth_multiple", "0.01", "0", "hardware: pnm.bandwidth_multiple must be > 0"),
    ("pim.bandwidth_multiple", "0.01", "0", "hardware: pim.bandwidth_multiple and pim.flops_per_byte must be > 0"),
    ("pim.flops_per_byte", "0.01", "0", "hardware: pim.bandwidth_multiple and pim.flops_per_byte must be > 0"),
    ("pim.capacity_fraction", "1", "1.01", "hardware: pim.capacity_fraction must be in (0, 1]"),
    ("pim.capacity_fraction", "0.01", "0", "hardware: pim.capacity_fraction must be in (0, 1]"),
]


@pytest.mark.parametrize("path, accepted, refused, message", CHECKS)
def test_each_check_accepts_its_boundary_and_refuses_the_value_past_it(path, accepted, refused, message) -> None:
    with_overrides(PAPER_HARDWARE, {path: accepted})       # raises if refused
    with pytest.raises(ConfigError) as error:
        with_overrides(PAPER_HARDWARE, {path: refused})
    assert str(error.value) == message


def test_one_nvlink_domain_has_no_network_to_check() -> None:
    single = replace(PAPER_HARDWARE, network=None, link=replace(PAPER_HARDWARE.link, hop_latency_s=0.0))
    assert single.network is None
    with pytest.raises(ConfigError, match="^hardware: link latencies must be >= 0$"):
        replace(single, link=replace(single.link, hop_latency_s=-1e-9))


@pytest.mark.parametrize("scale", [dict(bandwidth=0.0), dict(compute=0), dict(tsv_power_w=-1.0)])
def test_a_pnm_scale_refuses_no_bandwidth_no_lanes_or_negative_power(scale) -> None:
    PNMScale(bandwidth=1e-3, compute=1, tsv_power_w=0.0)     # the boundaries: accepted
    with pytest.raises(ConfigError) as error:
        PNMScale(**scale)
    assert str(error.value) == "PNM scale: bandwidth must be > 0, compute >= 1 and TSV power >= 0"


def test_pnm_scales_compose_by_multiplying_bandwidth_and_lanes_and_adding_tsv_power() -> None:
    once = DUPLEX_BANDWIDTH_COMPUTE.apply(PAPER_HARDWARE).pnm
    twice = DUPLEX_BANDWIDTH.apply(DUPLEX_BANDWIDTH_COMPUTE.apply(PAPER_HARDWARE)).pnm
    assert (once.bandwidth_multiple, once.lanes, once.lane_width) == (4.0, 64, 1024)
    assert once.tsv_power_w == pytest.approx(58.88) and once.power_w == 6.45
    assert (twice.bandwidth_multiple, twice.lanes) == (16.0, 64)
    assert twice.tsv_power_w == pytest.approx(2 * 58.88)


@pytest.mark.parametrize("overrides, message", [
    ({"gpu.nonsense": "1"}, "hardware has no field 'gpu.nonsense' ('nonsense' is not one of: name, flops, power_w, "
                            "sms, stacks, stack, sm_bandwidth, cores, pseudo_channels_per_stack)"),
    ({"gpus.x": "1"}, "hardware has no field 'gpus.x' ('x' is not one of: none)"),
    ({"gpu.stack": "1"}, "hardware field 'gpu.stack' is a group; name one of its fields"),
    ({"gpu.sm_bandwidth.sm_fractions": "1"},
     "hardware field 'gpu.sm_bandwidth.sm_fractions' is a group; name one of its fields"),
    ({"gpu.stacks": "2.5"}, "hardware field 'gpu.stacks' needs a int, got '2.5'"),
    ({"gpu.flops": "fast"}, "hardware field 'gpu.flops' needs a float, got 'fast'"),
    ({"gpu.flops": "inf"}, "hardware field 'gpu.flops' must be finite, got 'inf'"),
    ({"gpu.flops": "nan"}, "hardware field 'gpu.flops' must be finite, got 'nan'"),
])
def test_an_override_is_refused_in_one_line_naming_the_field(overrides, message) -> None:
    with pytest.raises(ConfigError) as error:
        with_overrides(PAPER_HARDWARE, overrides)
    assert str(error.value) == message


def test_overrides_keep_each_fields_type_and_reach_nested_fields() -> None:
    hw = with_overrides(PAPER_HARDWARE, {"gpu.stacks": "4.0", "gpu.name": "mine", "gpu.stack.bandwidth": "4e12",
                                         "link.nvls": "0"})
    assert hw.gpu.stacks == 4 and type(hw.gpu.stacks) is int and hw.gpu.name == "mine"
    assert hw.gpu.stack.bandwidth == 4e12 and hw.gpu.memory.bandwidth == 16e12     # 4 stacks of 4 TB/s
    assert hw.link.nvls is False and hw.pnm == PAPER_HARDWARE.pnm
    assert with_overrides(PAPER_HARDWARE, {"gpu.name": "5"}).gpu.name == "5"      # a name, not a number


def test_the_derived_figures() -> None:
    # §3.2's one point: 72 of 148 SMs reach 80 % of the bandwidth; linear to either end.
    assert B200_SM_BANDWIDTH(72 / 148) == pytest.approx(0.8)
    assert B200_SM_BANDWIDTH(36 / 148) == pytest.approx(0.4) and B200_SM_BANDWIDTH(1.0) == 1.0
    assert type(B200_SM_BANDWIDTH(0.5)) is float
    # 8 HBM4 stacks of 48 GB and 2 TB/s.
    assert PAPER_GPU.memory.bandwidth == 16e12 and PAPER_GPU.memory.capacity_bytes == 8 * 48e9
    assert PAPER_GPU.memory.name == "8x HBM4 stack"
    # 64 ports × 32 B at 1 GHz move 2.048 TB/s: 2 TB/s is 2 / 2.048 of a request per port and cycle.
    assert HBM4_MC.requests_per_cycle(2e12, 1e9) == pytest.approx(2e12 / (32 * 1e9 * 64))
    assert HBM4_MC.requests_per_cycle(2.048e12, 1e9) == pytest.approx(1.0)
