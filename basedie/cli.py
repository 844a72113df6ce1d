"""The `basedie` command. A thin layer: each subcommand imports its packages only when it runs."""
import argparse
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
        return args.run(args)
    except UsageError as error:
        print(f"basedie {args.command}: error: {error}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="basedie", description=__doc__)
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
    _add_bench_options(verify)
    verify.set_defaults(run=_verify)

    run = commands.add_parser("run", help="generate every block, verify it, write the table, summarize")
    run.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, help=f"Verilog folder ({DEFAULT_OUT})")
    _add_bench_options(run)
    run.set_defaults(run=_run)

    _add_simulate(commands)
    return parser


def _add_simulate(commands) -> None:
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
    simulate.set_defaults(run=_simulate)


def _add_bench_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--waves", action="store_true",
                        help="dump a VCD waveform of every bench (build/runs/<block>-<params>/dump.vcd)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="benches run at once (default: one per core)")
    parser.add_argument("--table", type=Path, default=None,
                        help="the verified-figures table to update (default: sysmodel/data/verified_blocks.json)")


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
    from sysmodel.verified import TABLE_PATH, store
    from tb.verify import verify

    names = [name for block in args.blocks for name in _block_names(block)]
    table = args.table or TABLE_PATH
    started = time.monotonic()
    entries = verify(names, waves=args.waves, jobs=args.jobs)
    store(entries, table, remeasured=names)
    _print_summary(entries, time.monotonic() - started, table)
    if args.waves:
        from tb.runner import BUILD_ROOT

        print(f"waveforms: {BUILD_ROOT / 'runs'}/<block>[-<parameters that differ from the defaults>]/dump.vcd")
    return 0


def _run(args) -> int:
    status = _generate(argparse.Namespace(block="all", out=args.out, param=[], lint=False))
    return status or _verify(argparse.Namespace(blocks=["all"], waves=args.waves, jobs=args.jobs, table=args.table))


def _simulate(args) -> int:
    from sysmodel import report
    from sysmodel.errors import ConfigError
    from sysmodel.simulate import simulate
    from sysmodel.verified import StaleTableError

    try:
        # Everything is checked and simulated before the first file is written.
        config = _simulation_config(args)
        out = args.out or SIMULATE_ROOT / _folder_name(args, config)
        report.check_destination(out)
        result = simulate(config)
    except (ConfigError, StaleTableError) as error:
        raise UsageError(str(error)) from None
    folder = report.write(result, out, args.argv)
    print(report.format_summary(result))
    print(f"output folder: {folder}")
    return 0


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
    # Flags that would have no effect are refused: the written configuration must describe what ran. (An
    # unknown system is left to `simulate`, whose message lists the known ones.)
    if args.qps is None and args.length_cv is not None:
        raise UsageError("--length-cv applies to Poisson arrivals; give --qps too")
    if args.mmu_policy is not None and args.system in SYSTEMS and args.system != "duopd":
        raise UsageError(f"--mmu-policy applies to duopd only, not {args.system}")
    if args.chunk_tokens is not None and args.system in SYSTEMS and args.system != "chunked":
        raise UsageError(f"--chunk-tokens applies to chunked only, not {args.system}")
    if args.qps is None:
        workload = FixedBatch(args.batch if args.requests is None else args.requests, args.input_len, args.output_len)
    else:
        workload = PoissonArrivals(args.qps, 1000 if args.requests is None else args.requests, args.input_len,
                                   args.output_len, DEFAULT_LENGTH_CV if args.length_cv is None else args.length_cv,
                                   args.seed)
    overrides = {}
    for item in args.hw:
        field, sep, value = item.partition("=")
        if not sep or not field or not value:
            raise UsageError(f"--hw takes FIELD=VALUE, got {item!r}")
        overrides[field.strip()] = value.strip()
    hardware = with_overrides(resolve_hardware("paper"), overrides)
    return SimulationConfig(args.system, resolve_model(args.model), workload, hardware,
                            args.mmu_policy or "prefill-first", args.batch, args.chunk_tokens)


def _folder_name(args, config) -> str:
    """`<system>-<model>-<workload>`, filesystem-safe; the system part carries the system flags given (so
    runs that differ only in them do not overwrite each other)."""
    system = args.system + (f"_{args.mmu_policy}" if args.mmu_policy else "") + (
        f"_chunk{args.chunk_tokens}" if args.chunk_tokens else "") + (
        "".join(f"_{item}" for item in args.hw))
    w = config.workload
    lengths = f"r{w.requests}-b{config.max_batch}-in{w.input_len}-out{w.output_len}"
    workload = (f"fixed-{lengths}" if args.qps is None
                else f"qps{w.qps:g}-{lengths}-cv{w.length_cv:g}-seed{w.seed}")
    return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{system}-{config.model.name.lower()}-{workload}")


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
    print(f"{len(entries)} bench runs passed in {seconds:.0f} s; figures written to {table}")
