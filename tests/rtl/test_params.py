"""Parameter dataclasses reject bad values by name."""
import pytest

from rtl.dqb.params import DQBParams
from rtl.fp.convert import FP32NarrowParams, ToFP32Params
from rtl.mmu.params import MMUParams


def test_bad_values_name_the_field() -> None:
    with pytest.raises(ValueError, match="source='fp64'"):
        ToFP32Params(source="fp64")
    with pytest.raises(ValueError, match="target='fp8_e4m3'"):
        FP32NarrowParams(target="fp8_e4m3")


def test_from_strings_converts_and_rejects() -> None:
    assert FP32NarrowParams.from_strings({"target": "bf16"}) == FP32NarrowParams(target="bf16")
    with pytest.raises(ValueError, match="unknown parameter 'bits'"):
        ToFP32Params.from_strings({"bits": "8"})


@pytest.mark.parametrize("field,value", [
    ("interface_bits", 48), ("internal_bits", 512), ("tag_bits", 4), ("request_table_bytes", 100),
    ("request_table_entry_bytes", 8), ("sz_buffer_bytes", 64), ("outstanding_reads", 6), ("rounding", "up"),
    ("design_clock_hz", 0), ("interface_bits", 65536), ("address_bits", 8),
])
def test_bad_dqb_parameters_name_the_field(field: str, value) -> None:
    with pytest.raises(ValueError, match=field):
        DQBParams(**{field: value})


def test_bad_mmu_parameters_name_the_field() -> None:
    for field, value in (("policy", "fair"), ("data_bits", 48), ("pending_entries", 0),
                         ("wrr_weight_gpu", 0), ("address_bits", 8), ("protected_regions", -1),
                         ("design_clock_hz", 0), ("data_bits", 65536)):
        with pytest.raises(ValueError, match=field):
            MMUParams(**{field: value})
