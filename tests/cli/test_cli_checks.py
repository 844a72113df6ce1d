"""The `simulate` options' checks, one by one, without simulating: each refusal's exact one-line message, and each
accepted combination's configuration (the defaults the help texts promise). Fast, so mutation testing of these
checks (scripts/mutation_modules.toml, `cli`) reruns only this file."""
import math

import pytest

from basedie import cli
from basedie.cli import UsageError
from basedie.simulation import simulate_parser, simulation_config
from sysmodel.arrivals import GammaArrivals, Lengths
from sysmodel.hbf.service import HBFOptions
from sysmodel.quantized import Quantization
from sysmodel.traces import Trace
from sysmodel.workload import FixedBatch, PoissonArrivals

BASE = ["--system", "duopd", "--model", "LLaMA2-70B"]


def config(*extra: str, base=BASE):
    return simulation_config(simulate_parser().parse_args([*base, *extra]))


def refused(*extra: str, base=BASE) -> str:
    with pytest.raises(UsageError) as error:
        config(*extra, base=base)
    return str(error.value)


@pytest.mark.parametrize("extra, message", [
    (["--qps", "nan"], "--qps must be a finite number, got nan"),
    (["--qps", "inf"], "--qps must be a finite number, got inf"),
    (["--qps", "1", "--length-cv", "inf"], "--length-cv must be a finite number, got inf"),
    (["--seed", "-1"], "--seed must be >= 0, got -1"),
    (["--batch", "0"], "--batch: max batch must be >= 1, got 0"),
    (["--length-cv", "0.2"], "--length-cv applies to Poisson arrivals; give --qps too"),
    (["--hw", "gpus"], "--hw takes FIELD=VALUE, got 'gpus'"),
    (["--hw", "=4"], "--hw takes FIELD=VALUE, got '=4'"),
    (["--hw", "gpus="], "--hw takes FIELD=VALUE, got 'gpus='"),
    (["--dqb-link", "unbounded"], "--dqb-link applies to --dequant dqb only"),
    (["--hbf-grade", "2"], "--hbf-grade needs a --memory layout that puts something in HBF (B, C or a file)"),
    (["--memory", "A", "--prefetch", "next-layer"],
     "--prefetch needs a --memory layout that puts something in HBF (B, C or a file)"),
    (["--memory", "B", "--hbf-read-us", "nan"], "--hbf-read-us must be a finite number, got nan"),
    (["--memory", "B", "--frame-cache-gb", "inf"], "--frame-cache-gb must be a finite number, got inf"),
    (["--memory", "B", "--ambient-c", "nan"], "--ambient-c must be a finite number, got nan"),
    (["--memory", "B", "--routing-skew", "inf"], "--routing-skew must be a finite number, got inf"),
    (["--memory", "B", "--routing-skew", "-0.5"], "--routing-skew must be >= 0, got -0.5"),
    (["--memory", "B", "--routing-skew", "1", "--routing-trace", "r.jsonl"],
     "--routing-skew shapes the seeded routing model; --routing-trace replaces it: give one"),
    (["--prefill-tp", "2"], "--prefill-tp applies to --system pd only"),
    (["--instances", "2"], "--instances applies to --system colocated only"),
    (["--router", "least-tokens"], "--router applies to --system colocated only"),
    (["--input-dist", "fixed"], "--input-dist applies to generated arrivals; give --qps too"),
    (["--qps", "1", "--input-range", "5"], "--input-range takes MIN:MAX tokens, got '5'"),
    (["--qps", "1", "--output-range", "1:x"], "--output-range takes MIN:MAX tokens, got '1:x'"),
    (["--qps", "1", "--output-range", "1:2:3"], "--output-range takes MIN:MAX tokens, got '1:2:3'"),
    (["--trace", "t.csv", "--qps", "1"], "--qps does not apply to --trace (the trace sets it)"),
    (["--trace", "t.csv", "--requests", "4"], "--requests does not apply to --trace (the trace sets it)"),
    (["--trace", "t.csv", "--output-dist", "fixed"], "--output-dist does not apply to --trace (the trace sets it)"),
])
def test_each_bad_option_is_refused_with_its_own_message(extra, message) -> None:
    assert refused(*extra) == message


@pytest.mark.parametrize("system, extra, message", [
    ("chunked", ["--mmu-policy", "mixed"],
     "--mmu-policy applies to duopd, duopd-4x-bw and duopd-4x-bw-4x-compute only, not chunked"),
    ("pd", ["--prefill-instances", "1", "--prefill-tp", "2", "--decode-instances", "1"],
     "--system pd needs --decode-tp"),
    ("pd", [], "--system pd needs --prefill-instances"),
    ("colocated", ["--instances", "2"], "--system colocated needs --instances and --tp"),
    ("colocated", ["--tp", "2"], "--system colocated needs --instances and --tp"),
    ("colocated", ["--instances", "1", "--tp", "1", "--decode-tp", "2"], "--decode-tp applies to --system pd only"),
])
def test_system_flags_are_refused_on_other_systems(system, extra, message) -> None:
    assert refused(*extra, base=["--system", system, "--model", "LLaMA2-70B"]) == message


@pytest.mark.parametrize("system, extra", [
    ("duopd", ["--mmu-policy", "decode-first"]), ("chunked", ["--chunk-tokens", "512"]),
    ("gpu", ["--chunk-tokens", "512"]),
    # An unknown system is left to the simulator, whose message lists the known ones.
    ("nonesuch", ["--mmu-policy", "mixed", "--chunk-tokens", "512"]),
])
def test_system_flags_are_accepted_where_they_apply(system, extra) -> None:
    assert config(*extra, base=["--system", system, "--model", "LLaMA2-70B"]).system == system


def test_a_fixed_batch_is_batch_requests_unless_requests_is_given() -> None:
    assert config("--batch", "4", "--input-len", "100", "--output-len", "7").workload == FixedBatch(4, 100, 7)
    assert config("--batch", "4", "--requests", "9").workload == FixedBatch(9, 16384, 128)
    assert config("--batch", "1").max_batch == 1  # the smallest batch is accepted


def test_poisson_arrivals_default_to_1000_requests_cv_0_1_and_take_the_seed() -> None:
    assert config("--qps", "2.5", "--seed", "0").workload == PoissonArrivals(2.5, 1000, 16384, 128, 0.1, 0)
    assert config("--qps", "2", "--requests", "8", "--length-cv", "0.3", "--seed", "5").workload == \
        PoissonArrivals(2.0, 8, 16384, 128, 0.3, 5)


def test_hardware_overrides_are_stripped_and_applied() -> None:
    assert config("--hw", " gpus = 4 ").hardware.gpus == 4
    # FIELD=VALUE splits at the first "=": the field is gpus, its value "4=5" (not a field "gpus=4").
    with pytest.raises(UsageError, match="hardware field 'gpus' needs a int, got '4=5'"):
        config("--hw", "gpus=4=5")
    assert config("--hw", "gpus=4", "--hw", "link.bandwidth=1e12").hardware.link.bandwidth == 1e12


def test_system_defaults_and_the_pd_and_colocated_names() -> None:
    default = config()
    assert default.model.name == "LLaMA2-70B"
    assert config(base=["--system", "duopd", "--model", "gpt3-175b"]).model.name == "GPT3-175B"
    assert config("--chunk-tokens", "512", base=["--system", "chunked", "--model", "LLaMA2-70B"]).chunk_tokens == 512
    assert (default.mmu_policy, default.chunk_tokens, default.memory, default.perf_model) == \
        ("prefill-first", None, "hbm", "roofline")
    assert config("--mmu-policy", "mixed").mmu_policy == "mixed"
    pd = ["--system", "pd", "--model", "LLaMA2-70B"]
    assert config("--prefill-instances", "1", "--prefill-tp", "2", "--decode-instances", "3", "--decode-tp", "4",
                  base=pd).system == "pd:1x2+3x4"
    colocated = ["--system", "colocated", "--model", "LLaMA2-70B"]
    assert config("--instances", "2", "--tp", "4", base=colocated).system == "colocated:2x4:sarathi:round-robin"
    assert config("--instances", "2", "--tp", "4", "--scheduler", "vllm", "--router", "least-tokens",
                  base=colocated).system == "colocated:2x4:vllm:least-tokens"


def test_generated_arrivals_take_per_field_lengths_and_ranges() -> None:
    workload = config("--qps", "3", "--input-len", "200", "--output-len", "20", "--input-dist", "lognormal",
                      "--output-range", "5:40", "--length-cv", "0.4", "--arrival-cv", "2", "--seed", "7").workload
    assert workload == GammaArrivals(3.0, 1000, Lengths(200, "lognormal", 0.4, 1, None),
                                     Lengths(20, "normal", 0.4, 5, 40), 2.0, 7)
    workload = config("--qps", "3", "--requests", "6", "--input-range", " 2 : 9 ").workload
    assert workload == GammaArrivals(3.0, 6, Lengths(16384, "normal", 0.1, 2, 9), Lengths(128), 1.0, 0)


def test_a_trace_is_the_workload_and_any_other_run_has_none_of_its_own() -> None:
    assert config("--trace", "t.csv").workload == Trace("t.csv")
    assert isinstance(config("--qps", "1").workload, PoissonArrivals)


def test_quantization_defaults_group_128_for_quantized_weights_and_0_for_fp16() -> None:
    assert config().quantization == Quantization("fp16", 0, None, None, "fp16", link_expanded=True)
    assert config("--weights", "w4a16", "--dequant", "dqb", "--dqb-link", "unbounded").quantization == \
        Quantization("w4a16", 128, "dqb", None, "fp16", link_expanded=False)
    assert config("--weights", "w8a16", "--group-size", "64", "--dequant", "gpu-fused", "--kernel", "gptq"
                  ).quantization == Quantization("w8a16", 64, "gpu-fused", "gptq", "fp16")
    assert config("--activations", "bf16").quantization.activations == "bf16"


def test_hbf_options_defaults_and_units() -> None:
    assert config().hbf == HBFOptions(1, None, None, "none", 45.0, 0.0, None, 0)
    hbf = config("--memory", "B", "--hbf-grade", "2", "--hbf-read-us", "30", "--frame-cache-gb", "4",
                 "--prefetch", "next-layer", "--ambient-c", "30", "--routing-skew", "0", "--seed", "3").hbf
    assert (hbf.grade, hbf.frame_cache_gib, hbf.prefetch, hbf.ambient_c, hbf.routing_skew, hbf.seed) == \
        (2, 4.0, "next-layer", 30.0, 0.0, 3)
    assert math.isclose(hbf.read_s, 30e-6)  # microseconds on the command line, seconds in the model
    assert config("--memory", "B", "--routing-skew", "1.5").hbf.routing_skew == 1.5
    traced = config("--memory", "B", "--routing-trace", "r.jsonl").hbf     # read when the tier is built
    assert (traced.routing_trace, traced.routing_skew) == ("r.jsonl", 0.0)


def test_param_overrides_and_block_names() -> None:
    assert cli._parse_overrides(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    for pair in ("a", "=1"):
        with pytest.raises(UsageError) as error:
            cli._parse_overrides([pair])
        assert str(error.value) == f"--param {pair!r} is not NAME=VALUE"
    assert cli._block_names("mmu") == ["mmu"]
    from rtl.registry import BLOCKS
    assert cli._block_names("all") == list(BLOCKS)
    with pytest.raises(UsageError) as error:
        cli._block_names("nonesuch")
    assert str(error.value) == f"unknown block 'nonesuch' (known: {', '.join(BLOCKS)}, all)"


def test_the_shared_prefix_and_the_modelling_effects_reach_the_configuration() -> None:
    chunked = ["--system", "chunked", "--model", "Qwen3-30B-A3B"]
    assert config(base=chunked).shared_prefix_tokens == 0
    assert config("--shared-prefix-tokens", "64", base=chunked).shared_prefix_tokens == 64
    plain = config()
    assert (plain.all_reduce, plain.overlap, plain.decode_hardware) == ("bandwidth", False, None)
    pd = config("--allreduce", "alpha-beta", "--allreduce-overlap", "--decode-hardware", "other",
                base=["--system", "pd-1:1", "--model", "LLaMA2-70B"])
    assert (pd.all_reduce, pd.overlap, pd.decode_hardware) == ("alpha-beta", True, "other")


import argparse  # noqa: E402  (the options module's own tests, added at the end of this file)
import dataclasses  # noqa: E402

from sysmodel.errors import ConfigError  # noqa: E402
from sysmodel.options import Option, add_arguments, at_least, check_fields  # noqa: E402
from sysmodel.options import options as options_metadata, read as read_options  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _Options:
    """A configuration of three fields: one named by its own option, two grouped, one under another name."""
    size: int = dataclasses.field(default=4, metadata=options_metadata(
        Option("--size", "how many", type=int, required=True), check=at_least(1, "size")))
    rate: float = dataclasses.field(default=2.0, metadata=options_metadata(
        Option("--speed", "how fast", type=float), check=at_least(0.5, "rate"), group="timing"))
    burst: int = dataclasses.field(default=1, metadata=options_metadata(
        Option("--burst", "how many at once", type=int), group="timing"))


def test_option_metadata_carries_its_options_reader_check_and_group() -> None:
    option, reader, check = Option("--x", "an x"), (lambda args, values: 1), (lambda value: None)
    assert options_metadata(option, read=reader, check=check, group="g") == {
        "options": (option,), "read": reader, "check": check, "group": "g"}
    assert at_least(1, "max batch")(0) == "max batch must be >= 1, got 0"
    assert at_least(1, "max batch")(1) is None and at_least(1, "max batch")(None) is None


def test_a_configurations_options_are_added_in_their_groups_and_read_with_their_checks() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, _Options)
    assert [g.title for g in parser._action_groups].count("timing") == 1
    assert [a.option_strings for a in parser._action_groups[-1]._group_actions] == [["--speed"], ["--burst"]]
    with pytest.raises(SystemExit):
        parser.parse_args([])                                   # --size is required
    assert read_options(_Options, parser.parse_args(["--size", "3"])) == _Options(size=3, rate=2.0)
    with pytest.raises(ConfigError) as error:
        read_options(_Options, parser.parse_args(["--size", "0"]))
    assert str(error.value) == "size must be >= 1, got 0"       # the option is named as the field
    with pytest.raises(ConfigError) as error:
        read_options(_Options, parser.parse_args(["--size", "2", "--speed", "0.1"]))
    assert str(error.value) == "--speed: rate must be >= 0.5, got 0.1"
    with pytest.raises(ConfigError) as error:
        check_fields(_Options(size=0))
    assert str(error.value) == "size must be >= 1, got 0"
    check_fields(_Options())
