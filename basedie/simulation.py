"""`basedie simulate`: its options, generated from `sysmodel.config.SimulationConfig` (each field names the options
that set it), and the one path from parsed options to a simulation, shared by `basedie sweep`'s points."""
import argparse
import re
from pathlib import Path

from basedie.errors import UsageError

SIMULATE_ROOT = Path("build") / "simulate"


def add_simulate(commands) -> None:
    """The `simulate` subcommand; its options are added when it is used (`cli.Parser`), so that other commands
    never import the system model."""
    commands.add_parser(
        "simulate", help="simulate LLM serving on one system; print a summary, write metrics and plots",
        description="Simulate LLM serving on one system: a fixed batch of requests at time 0, or Poisson "
                    "arrivals with --qps. Prints a summary and writes JSON, CSV and PNG files to --out "
                    "(options: docs/reference/configuration.md).", options=add_options)


def add_options(parser: argparse.ArgumentParser) -> None:
    """`simulate`'s options: the configuration's (`sysmodel.config`), then where the results go."""
    from sysmodel.config import SimulationConfig
    from sysmodel.options import add_arguments

    add_arguments(parser, SimulationConfig)
    parser.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                        help=f"output folder (default {SIMULATE_ROOT}/<system>-<model>-<workload>)")
    parser.add_argument("--no-plots", action="store_true", help="write the JSON and CSV files only, no PNGs")
    parser.set_defaults(run=run)


def run(args) -> int:
    from sysmodel import report
    from sysmodel.errors import ConfigError
    from basedie.verified import StaleTableError

    try:
        # Everything is checked and simulated before the first file is written.
        config, result = simulation(args, progress=True)
        out = args.out or SIMULATE_ROOT / folder_name(args, config)
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
    parser = argparse.ArgumentParser(prog="basedie simulate")
    add_options(parser)

    def error(message: str):
        raise UsageError(message)

    parser.error = error
    return parser


def simulation_config(args):
    """The `SimulationConfig` of parsed `simulate` options; a bad option is a UsageError naming it."""
    from sysmodel.config import SimulationConfig
    from sysmodel.errors import ConfigError
    from sysmodel.options import read

    try:
        return read(SimulationConfig, args)
    except ConfigError as error:
        raise UsageError(str(error)) from None


def simulation(args, table=None, progress: bool = False):
    """(SimulationConfig, Result) of parsed `simulate` options: the one path of `basedie simulate` and of every
    `basedie sweep` point. `table`: the verified figures (default: loaded and checked on every call); `progress`:
    a bar of the requests arrived on a terminal."""
    from sysmodel.simulate import simulate

    config = simulation_config(args)
    return config, simulate(config, table, progress)


def folder_name(args, config) -> str:
    """`<system>-<model>-<workload>`, filesystem-safe; the system part carries the system flags given (so
    runs that differ only in them do not overwrite each other)."""
    from sysmodel.config import HBF_FLAGS, SYNTHETIC_FLAGS

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
        f"_prefix{args.shared_prefix_tokens}" if args.shared_prefix_tokens else "") + (
        f"_ar-{args.allreduce}" if args.allreduce != "bandwidth" else "") + (
        "_overlap" if args.allreduce_overlap else "") + (
        f"_decode-{args.decode_hardware}" if args.decode_hardware else "")
    w = config.workload
    if args.trace is not None:
        return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{config.system}{system[len(args.system):]}-"
                                                  f"{config.model.name.lower()}-trace-{Path(args.trace).stem}"
                                                  f"{'-x%d' % args.trace_repeat if args.trace_repeat else ''}"
                                                  f"{'-t0' if args.arrivals == 'none' else ''}-b{config.max_batch}")
    lengths = f"r{w.requests}-b{config.max_batch}-in{w.input_len}-out{w.output_len}"
    workload = (f"fixed-{lengths}" if args.qps is None
                else f"qps{w.qps:g}-{lengths}-cv{0.1 if args.length_cv is None else args.length_cv:g}-seed{w.seed}"
                + "".join(f"-{f}{getattr(args, f)}" for f in SYNTHETIC_FLAGS if getattr(args, f) is not None))
    return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{config.system}{system[len(args.system):]}-"
                                              f"{config.model.name.lower()}-{workload}")
