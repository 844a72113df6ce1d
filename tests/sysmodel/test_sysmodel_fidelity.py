"""Engine correctness found by replaying and fuzzing (issue 15): relative time, finite results, the decode
queue as its own metric, one-line errors that name the flag."""
from dataclasses import dataclass

import numpy as np
import pytest

from basedie.cli import main
from basedie import verified
from sysmodel.engine import Request
from sysmodel.errors import ConfigError
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch

SMALL = ["simulate", "--system", "duopd", "--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "16",
         "--no-plots"]


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


@dataclass(frozen=True)
class Shifted:
    """Requests every half second (exact in binary) from `origin`."""
    origin: float
    requests: int = 6

    def generate(self) -> list[Request]:
        return [Request(i, self.origin + 0.5 * i, 1024, 24) for i in range(self.requests)]


@pytest.mark.parametrize("system", ["duopd", "pd-1:1", "chunked"])
def test_arrivals_near_1e12_s_give_the_same_run_as_near_0(table, system: str) -> None:
    # A double near 1e12 resolves 0.12 ms: token times kept absolute would be rounded to that and the ~1 ms
    # gaps between tokens would come out wrong by up to 10 %.
    near_zero = simulate(SimulationConfig(system=system, model="llama2-70b", workload=Shifted(0.0)), table)
    far = simulate(SimulationConfig(system=system, model="llama2-70b", workload=Shifted(1e12)), table)
    for a, b in zip(near_zero.requests, far.requests, strict=True):
        assert a.token_times == b.token_times
    assert near_zero.summary["tbt_s"] == far.summary["tbt_s"]


def test_arrivals_spread_over_more_than_1e7_s_are_refused(table) -> None:
    @dataclass(frozen=True)
    class Spread:
        def generate(self) -> list[Request]:
            return [Request(0, 0.0, 64, 4), Request(1, 2e7, 64, 4)]

    with pytest.raises(ConfigError, match="arrivals span 2e\\+07 s"):
        simulate(SimulationConfig(system="duopd", model="llama2-70b", workload=Spread()), table)


@pytest.mark.parametrize("system", ["pd-1:1", "pd-3:1"])
def test_decode_queue_is_the_wait_between_reaching_decode_and_joining_a_batch(table, system: str) -> None:
    # Max batch 2 with 8 requests at t = 0: most requests wait for a decode slot after their KV arrives.
    result = simulate(SimulationConfig(system=system, model="llama2-70b", workload=FixedBatch(8, 1024, 24),
                                       max_batch=2), table)
    waits = np.array([row["decode_queue_s"] for row in result.rows])
    assert (waits >= 0).all() and (waits > 0).sum() >= 4
    for request, wait in zip(result.requests, waits):
        # The request's first decode token comes one iteration after it joins, never before.
        assert request.decode_ready >= request.first_token
        assert request.token_times[1] > request.decode_start == pytest.approx(request.decode_ready + wait)
    assert result.summary["decode_queue_s"]["p50"] == pytest.approx(np.percentile(waits, 50))


def test_colocated_decode_never_waits_for_a_slot(table) -> None:
    result = simulate(SimulationConfig(system="chunked", model="llama2-70b", workload=FixedBatch(4, 1024, 24)), table)
    assert all(row["decode_queue_s"] == 0.0 for row in result.rows)


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("extra,message", [
    (["--batch", "0"], "--batch: max batch must be >= 1, got 0"),
    (["--requests", "4", "--hw", "gpu.flops=1e-300"], "request 0 got no finite completion time"),
])
def test_bad_input_names_its_cause_on_one_line(tmp_path, monkeypatch, capsys, extra, message) -> None:
    monkeypatch.chdir(tmp_path)
    code, stdout, err = run([*SMALL, *extra], capsys)
    assert (code, stdout) == (2, "")
    assert err == f"basedie simulate: error: {err.split('error: ', 1)[1]}" and err.count("\n") == 1
    assert message in err
    assert list(tmp_path.iterdir()) == []
