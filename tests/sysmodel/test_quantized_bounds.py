"""The DQB path's bounds grow with the GEMM's rows by the activations alone: each extra row of M reads K + N
16-bit values from DRAM and over the link, and passes its K activations through the DQBs at the bypass rate."""
import pytest

from basedie import verified
from sysmodel.hardware import A100_PCIE_40GB
from sysmodel.quantized import GemmModel, Quantization

K, N = 4096, 1024


@pytest.mark.parametrize("link_expanded", [True, False])
def test_each_extra_row_costs_its_activations_in_dram_the_dqbs_and_the_link(link_expanded) -> None:
    gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", 128, "dqb", link_expanded=link_expanded),
                           verified.load())
    one, three = gemm.dqb_bounds(1, K, N), gemm.dqb_bounds(3, K, N)
    assert list(one) == ["dram", "dqb", "link"] if link_expanded else ["dram", "dqb"]
    bandwidth = A100_PCIE_40GB.memory.bandwidth
    beats = gemm.dqbs * gemm.dqb.beat_bytes * gemm.dqb.clock_hz       # bytes/s at one beat per cycle everywhere
    assert three["dram"] - one["dram"] == pytest.approx(2 * 2 * (K + N) / bandwidth, rel=1e-9)
    assert three["dqb"] - one["dqb"] == pytest.approx(2 * 2 * K / (beats * gemm.dqb.bypass_beats_per_cycle),
                                                      rel=1e-9)
    if link_expanded:
        assert three["link"] - one["link"] == pytest.approx(2 * 2 * (K + N) / bandwidth, rel=1e-9)
