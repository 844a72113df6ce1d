"""Every cell of the composition matrix (`sysmodel.composition`) runs with finite results or is refused for a
physical reason. The cells refused today because two parts are not wired together are xfail (strict) with the
message they give, so each gap closed flips its cells."""
import pytest

from basedie import verified
from sysmodel.composition import Cell, cells, outcome
from sysmodel.quantized import sz_fraction
from sysmodel.simulate import simulate


@pytest.fixture(scope="module")
def table():
    return verified.load()


def gap(cell: Cell) -> str | None:
    """The refusal a cell gives today that is not physical (None: the cell runs or is physically refused)."""
    quantized = cell.weights != "fp16"
    no_kernel = cell.weights == "fp8" and cell.dequant != "dqb"
    no_hbf_stack = cell.memory in ("hbm", "A") and cell.placement.endswith("-hbf")
    if no_kernel or no_hbf_stack:
        return None
    kv_apart = cell.placement in ("kv-hbf", "prefix-hbf") or cell.placement == "prefix-hbm"
    if kv_apart and cell.system in ("duopd", "pd-1:1", "sm-7:3"):
        return "a shared prefix or a KV cache in HBF is modelled for chunked and gpu"
    if cell.system.startswith("colocated") and cell.memory in ("B", "C"):
        return "weights in HBF are not modelled for colocated deployments"
    if quantized and cell.system == "duopd":
        return "duopd: decoding quantized weights on the PNMs is not modelled"
    if quantized and cell.system.startswith("sm-"):
        return "SM partitions with quantized weights are not modelled"
    return None


def _param(cell: Cell):
    reason = gap(cell)
    return pytest.param(cell, id=cell.id, marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else [])


@pytest.mark.parametrize("cell", [_param(cell) for cell in cells()])
def test_cell_runs_or_is_physically_refused(cell, table):
    kind, detail = outcome(cell, table)
    assert kind in ("runs", "refused"), detail
    if kind == "runs":
        assert float(detail) > 0


@pytest.mark.parametrize("weights, bits", [("w4a16", 4), ("w8a16", 8)])
def test_hbf_pages_hold_the_stored_quantized_bytes(table, weights, bits):
    # Layout C puts the layer weights in HBF: each layer's object, the flash bytes read and the frame cache's
    # capacity in objects all scale by the stored bytes per FP16 byte, bits / 16 with the S/Z share on top.
    def hbf(weights, dequant):
        return simulate(Cell("chunked", weights, dequant, None, "C", "kv-hbm").config(), table).summary["hbf"]
    fp16, quantized = hbf("fp16", None), hbf(weights, "dqb")
    ratio = bits / 16 / (1 - sz_fraction(table, bits, 128))
    assert quantized["object_bytes"] / fp16["object_bytes"] == pytest.approx(ratio, rel=1e-9)
    assert quantized["hbf_media_read_bytes"] / fp16["hbf_media_read_bytes"] == pytest.approx(ratio, rel=0.01)
    # Whole objects: the FP16 cache holds n of them and less than n + 1, so the quantized one n / ratio to
    # (n + 1) / ratio.
    n = fp16["frame_cache_objects"]
    assert n / ratio - 1 < quantized["frame_cache_objects"] < (n + 1) / ratio
