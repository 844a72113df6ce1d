"""The `basedie` command. A thin layer: each subcommand imports its packages only when it runs."""
import argparse
import os
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path("build") / "verilog"


class UsageError(Exception):
    """A bad block name, parameter or value: reported on one line, exit code 2."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
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
    return parser


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
