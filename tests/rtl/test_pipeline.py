"""Stage bookkeeping: the depth a datapath states is the depth it builds."""
import gc

import pytest
from amaranth.hdl import Cat, Const, Fragment, Module
from amaranth.lib import data

from rtl.fp.multiply import fp16_mul_fp32
from rtl.pipeline import PipelinedUnit, Stages


@pytest.fixture
def stages():
    m = Module()
    yield Stages(m, Const(1))
    Fragment.get(m, None)  # elaborate it, as a design would


def test_parallel_forks_share_the_depth(stages) -> None:
    stages(x=Const(1, 4))
    lanes = [stages.fork() for _ in range(3)]
    for lane in lanes:
        lane(y=Const(0, 2))
        lane(z=Const(0, 2))
    assert stages.depth == 3


def test_forks_of_unequal_depth_are_refused(stages) -> None:
    stages.fork()(y=Const(0, 2))
    with pytest.raises(ValueError, match="unequal depth"):
        _ = stages.fork().depth + stages.depth


class _TwoLanes(PipelinedUnit):
    """Two FP16 products side by side through one set of stage enables."""

    def __init__(self, latency: int) -> None:
        self.latency = latency
        super().__init__(data.ArrayLayout(32, 2), 64)

    def datapath(self, stages, x):
        return Cat(*[fp16_mul_fp32(stages.fork(), x[k][:16], x[k][16:]) for k in range(2)])


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # the refused module
def test_stated_latency_must_match_the_stages() -> None:
    Fragment.get(_TwoLanes(latency=3), None)     # elaboration builds the stages and checks them
    with pytest.raises(AssertionError, match="states latency 4 but its datapath has 3 stages"):
        Fragment.get(_TwoLanes(latency=4), None)
    gc.collect()
