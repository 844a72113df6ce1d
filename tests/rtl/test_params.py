"""Parameter dataclasses reject bad values by name."""
import pytest

from rtl.fp.convert import FP32NarrowParams, ToFP32Params


def test_bad_values_name_the_field() -> None:
    with pytest.raises(ValueError, match="source='fp64'"):
        ToFP32Params(source="fp64")
    with pytest.raises(ValueError, match="target='fp8_e4m3'"):
        FP32NarrowParams(target="fp8_e4m3")


def test_from_strings_converts_and_rejects() -> None:
    assert FP32NarrowParams.from_strings({"target": "bf16"}) == FP32NarrowParams(target="bf16")
    with pytest.raises(ValueError, match="unknown parameter 'bits'"):
        ToFP32Params.from_strings({"bits": "8"})
