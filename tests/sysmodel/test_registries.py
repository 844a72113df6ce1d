"""The extension points' registries: a system added as one module plus one registration line is simulated and
offered by the command line; unknown names are refused with the choices; the docs' tables are current."""
import importlib
import sys

import pytest

from basedie.cli import main
from basedie.simulation import simulate_parser
from sysmodel.config import SimulationConfig
from sysmodel.deployments import ROUTERS, SCHEDULERS, Colocated, parse
from sysmodel.errors import ConfigError
from sysmodel.reference import PAGE, update
from sysmodel.registry import Registry
from sysmodel.simulate import simulate
from sysmodel.systems import SYSTEMS
from sysmodel.traces import Trace
from sysmodel.workload import FixedBatch


@pytest.fixture
def toy(monkeypatch):
    """The toy system registered for one test (the registry restored after it)."""
    monkeypatch.setattr(SYSTEMS, "_items", dict(SYSTEMS._items))
    name = "tests.sysmodel.toy_system"
    module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
    return module.Toy


def test_a_toy_system_is_one_module_and_one_registration(toy) -> None:
    assert isinstance(SYSTEMS["toy"], toy)
    workload = FixedBatch(4, 512, 8)
    ran, same = (simulate(SimulationConfig(system=s, model="llama2-7b", workload=workload))
                 for s in ("toy", "colocated:1x2:orca"))
    assert all(r.done for r in ran.requests)
    assert ran.config["system_spec"] == "Toy(tp=2)"
    # The toy wires what colocated:1x2:orca wires, so it serves every request at the same times.
    assert [(r.first_token, r.finish) for r in ran.requests] == [(r.first_token, r.finish) for r in same.requests]


def test_the_command_line_offers_and_runs_a_registered_system(toy, tmp_path, capsys) -> None:
    system = next(a for a in simulate_parser()._actions if "--system" in a.option_strings)
    assert "toy" in system.help
    assert main(["simulate", "--system", "toy", "--model", "llama2-7b", "--batch", "2", "--input-len", "256",
                 "--output-len", "4", "--no-plots", "--out", str(tmp_path / "toy")]) == 0
    assert "output folder" in capsys.readouterr().out


def test_without_the_registration_the_toy_is_unknown(tmp_path, capsys) -> None:
    assert "toy" not in SYSTEMS
    assert main(["simulate", "--system", "toy", "--model", "llama2-7b", "--out", str(tmp_path / "toy")]) == 2
    assert "unknown system 'toy'; choose one of duopd," in capsys.readouterr().err


def test_a_registry_refuses_unknown_names_with_the_choices_and_twice_registered_ones() -> None:
    colours = Registry("colour", key=str.lower)
    colours.register("Red", 1, "warm")
    colours.register("blue", 2)
    assert (colours["RED"], colours.lookup("Blue"), list(colours), colours.help("red")) == (1, 2, ["Red", "blue"],
                                                                                           "warm")
    with pytest.raises(ConfigError) as error:
        colours.lookup("green")
    assert str(error.value) == "unknown colour 'green'; choose one of Red, blue"
    with pytest.raises(ValueError, match="colour 'red' is registered already"):
        colours.register("red", 3)
    assert "green" not in colours and 1 not in colours


def test_colocated_schedulers_and_routers_come_from_their_registries() -> None:
    assert list(SCHEDULERS) == ["sarathi", "vllm", "orca"] and list(ROUTERS) == ["round-robin", "least-tokens"]
    assert ROUTERS["round-robin"]([5, 0, 0], 4) == 1 and ROUTERS["least-tokens"]([5, 0, 0], 4) == 1
    assert ROUTERS["least-tokens"]([3, 1, 2], 0) == 1
    with pytest.raises(ConfigError, match="unknown router 'random'; choose one of round-robin, least-tokens"):
        parse("colocated:2x4:sarathi:random")


def test_the_configuration_pages_tables_are_current() -> None:
    """docs/reference/configuration.md's tables are what `python -m sysmodel.reference` writes from the registries."""
    text = PAGE.read_text()
    assert update(text) == text
    assert "| `sm-7:3` | `SMPartition(prefill_fraction=0.7)` |" in text and "| `--batch` | `16` |" in text
    with pytest.raises(ValueError, match="unknown table 'nonesuch'"):
        update("<!-- table: nonesuch -->\n<!-- end -->")


def test_an_item_registered_without_help_has_an_empty_help() -> None:
    """The docs' tables print the help as given: none is an empty cell, not a placeholder."""
    colours = Registry("colour")
    colours.register("blue", 2)
    assert colours.help("blue") == ""


def test_one_colocated_instance_is_accounted_as_the_chunked_system() -> None:
    """`colocated:1x8:sarathi` wires what `chunked` wires: one account of all eight GPUs (flops, bandwidth, power),
    named after the instance, with the same utilisation and energy."""
    workload = FixedBatch(4, 512, 8)
    chunked, colocated = (simulate(SimulationConfig(system=s, model="llama2-7b", workload=workload)).summary
                          for s in ("chunked", "colocated:1x8:sarathi"))
    for figure in ("utilization", "energy_j"):
        assert list(colocated[figure]["by_server"]) == ["instance 0 (TP8, sarathi)"]
        assert list(colocated[figure]["by_server"].values()) == list(chunked[figure]["by_server"].values())
    assert colocated["utilization"]["gpu_compute"] == chunked["utilization"]["gpu_compute"] > 0
    assert colocated["energy_j"]["total"] == chunked["energy_j"]["total"] > 0


def test_least_tokens_forgets_the_tokens_of_finished_requests(tmp_path) -> None:
    """A long request (4,096 + 32 tokens) goes to instance 0, a short one (128 + 8) to instance 1; once both have
    finished both instances have nothing outstanding, and the third request takes the tie's first instance,
    which is then the busier one."""
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_len,output_len\n0,4096,32\n0,128,8\n10,4096,32\n")
    busy = simulate(SimulationConfig(system="colocated:2x1:orca:least-tokens", model="llama2-7b",
                                     workload=Trace(str(path)))).summary["utilization"]["by_server"]
    assert busy["instance 0 (TP1, orca)"]["busy"] > 2 * busy["instance 1 (TP1, orca)"]["busy"]


def test_least_tokens_counts_every_routed_token_of_an_instance(tmp_path) -> None:
    """All at t = 0: (100 + 1,000) to instance 0, (600 + 10) and (500 + 10) to instance 1, which then has more
    outstanding (1,120 against 1,100), so (2,000 + 10) to instance 0: 3,110 tokens there, 1,120 on instance 1.
    Counting a request's prompt minus its output, or its tokens without the earlier ones', routes otherwise."""
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_len,output_len\n0,100,1000\n0,600,10\n0,500,10\n0,2000,10\n")
    compute = simulate(SimulationConfig(system="colocated:2x1:orca:least-tokens", model="llama2-7b",
                                        workload=Trace(str(path)))).summary["utilization"]["by_server"]
    assert compute["instance 0 (TP1, orca)"]["compute"] > 2 * compute["instance 1 (TP1, orca)"]["compute"]


def test_a_colocated_instance_that_cannot_hold_the_model_is_named() -> None:
    with pytest.raises(ConfigError) as error:
        simulate(SimulationConfig(system="colocated:2x1", model="llama2-70b", hardware="a100-sxm4-80gb",
                                  workload=FixedBatch(1, 16, 2)))
    assert str(error.value).startswith("LLaMA2-70B does not fit on instance 0: 138.0 GB of weights per GPU")


def test_deployment_specs_are_parsed_and_checked_with_exact_messages() -> None:
    assert parse("colocated:2x4") == Colocated(2, 4, "sarathi", "round-robin")
    assert Colocated(2, 1).tp == 1
    for instances, tp in ((0, 1), (1, 0)):
        with pytest.raises(ConfigError) as error:
            Colocated(instances, tp)
        assert str(error.value) == "colocated: instances and TP must be >= 1"
    with pytest.raises(ConfigError) as error:
        parse("pd:0x4+1x4")
    assert str(error.value) == "pd:0x4+1x4: instance counts and TP degrees must be >= 1"
    with pytest.raises(ConfigError) as error:
        parse("nonesuch")
    assert str(error.value).endswith("or colocated:NxT[:sarathi|vllm|orca[:round-robin|least-tokens]]")
