"""The one configuration of a simulation: a frozen, keyword-only `SimulationConfig` whose fields carry their
command-line options, help, readers and checks (`sysmodel.options`), and `resolve`, which turns it into the
`Setting` the systems are built from, resolving each input (model, hardware, decode hardware, memory layout,
verified figures) once.

The field order is the order of the checks and of `basedie simulate --help`. An option only some systems read
(`--mmu-policy`, `--chunk-tokens`) is refused on the others (`System.options`); a flag that would have no effect
is refused, so the written configuration describes what ran."""
import argparse
import math
from dataclasses import dataclass, field, replace

from basedie import verified
from .arbitration import POLICIES
from .arrivals import GammaArrivals, Lengths
from .deployments import ROUTERS, SCHEDULERS, parse
from .errors import ConfigError, require
from .hardware import Hardware, with_overrides
from .hbf.layout import PRESETS as LAYOUTS, Layout, resolve_layout
from .hbf.service import HBFOptions
from .llm import LLM, MODEL_PRESETS, resolve_model
from .options import Option, at_least, check_fields, finite, options
from .perf import ALL_REDUCE_MODELS, PERF_MODELS
from .power import POWER_SOURCES
from .presets import PRESETS
from .quantized import Quantization
from .systems import SYSTEMS, Disaggregated, Setting, using
from .traces import Trace
from .workload import DEFAULT_LENGTH_CV, FixedBatch, PoissonArrivals

HBF_GROUP = "High-Bandwidth Flash (docs/design/hbf.md)"
DEPLOYMENT_FLAGS = {"pd": ("prefill_instances", "prefill_tp", "decode_instances", "decode_tp"),
                    "colocated": ("instances", "tp", "scheduler", "router")}
SYNTHETIC_FLAGS = ("arrival_cv", "input_dist", "output_dist", "input_range", "output_range")
HBF_FLAGS = ("hbf_grade", "hbf_read_us", "frame_cache_gb", "prefetch", "ambient_c", "routing_skew", "routing_trace")


def _listed(names, last: str = "or") -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


def resolve_hardware(spec: str | Hardware) -> Hardware:
    """A `Hardware`, or a preset name (any case) of `presets.PRESETS`."""
    return spec if isinstance(spec, Hardware) else PRESETS.lookup(spec)


# --- readers: a field's value from the parsed options (and the fields read before it) ---

def _system(args: argparse.Namespace, values: dict) -> str:
    """`--system pd` / `colocated` with their pool flags → the deployment's name (`sysmodel.deployments`)."""
    for system, flags in DEPLOYMENT_FLAGS.items():
        given = [f for f in flags if getattr(args, f) is not None]
        if given and args.system != system:
            raise ConfigError(f"--{given[0].replace('_', '-')} applies to --system {system} only")
    if args.system == "pd":
        missing = [f for f in DEPLOYMENT_FLAGS["pd"] if getattr(args, f) is None]
        if missing:
            raise ConfigError(f"--system pd needs --{missing[0].replace('_', '-')}")
        return "pd:{}x{}+{}x{}".format(*(getattr(args, f) for f in DEPLOYMENT_FLAGS["pd"]))
    if args.system == "colocated":
        require(args.instances is not None and args.tp is not None, "--system colocated needs --instances and --tp")
        return f"colocated:{args.instances}x{args.tp}:{args.scheduler or 'sarathi'}:{args.router or 'round-robin'}"
    return args.system


def _for_some_systems(name: str, default):
    """The reader of an option that only the systems of `using(name)` read; an unknown system is left to
    `resolve`, whose message lists the known ones."""
    def read(args: argparse.Namespace, values: dict):
        value, users = getattr(args, name), using(name)
        require(value is None or args.system not in SYSTEMS or args.system in users,
                f"--{name.replace('_', '-')} applies to {_listed(users, 'and')} only, not {args.system}")
        return default if value is None else value
    return read


def _workload(args: argparse.Namespace, values: dict):
    """A trace, generated arrivals (Poisson, or Gamma with per-field lengths when any of their flags is given), or
    a fixed batch at time 0."""
    finite(args, "qps", "length_cv")
    require(args.seed >= 0, f"--seed must be >= 0, got {args.seed}")
    require(args.qps is not None or args.length_cv is None, "--length-cv applies to Poisson arrivals; give --qps too")
    synthetic = [f for f in SYNTHETIC_FLAGS if getattr(args, f) is not None]
    requests = 1000 if args.requests is None else args.requests
    if args.trace is not None:
        clash = [f for f in ("qps", "requests", "length_cv", *SYNTHETIC_FLAGS) if getattr(args, f) is not None]
        if clash:
            raise ConfigError(f"--{clash[0].replace('_', '-')} does not apply to --trace (the trace sets it)")
        return Trace(args.trace, args.arrivals or "trace", 1 if args.trace_repeat is None else args.trace_repeat)
    trace_flags = [f for f in ("arrivals", "trace_repeat") if getattr(args, f) is not None]
    if trace_flags:
        raise ConfigError(f"--{trace_flags[0].replace('_', '-')} applies to --trace only")
    if not synthetic:
        if args.qps is None:
            return FixedBatch(args.batch if args.requests is None else args.requests, args.input_len, args.output_len)
        return PoissonArrivals(args.qps, requests, args.input_len, args.output_len,
                               DEFAULT_LENGTH_CV if args.length_cv is None else args.length_cv, args.seed)
    require(args.qps is not None, f"--{synthetic[0].replace('_', '-')} applies to generated arrivals; give --qps too")
    cv = 0.1 if args.length_cv is None else args.length_cv
    lengths = {}
    for name in ("input", "output"):
        low, high = 1, None
        given = getattr(args, f"{name}_range")
        if given is not None:
            parts = given.split(":")
            require(len(parts) == 2 and all(p.strip().isdigit() for p in parts),
                    f"--{name}-range takes MIN:MAX tokens, got {given!r}")
            low, high = int(parts[0]), int(parts[1])
        lengths[name] = Lengths(getattr(args, f"{name}_len"), getattr(args, f"{name}_dist") or "normal", cv, low, high)
    return GammaArrivals(args.qps, requests, lengths["input"], lengths["output"],
                         1.0 if args.arrival_cv is None else args.arrival_cv, args.seed)


def _hardware(args: argparse.Namespace, values: dict) -> Hardware:
    overrides = {}
    for item in args.hw:
        name, sep, value = item.partition("=")
        require(sep and name and value, f"--hw takes FIELD=VALUE, got {item!r}")
        overrides[name.strip()] = value.strip()
    return with_overrides(resolve_hardware(args.hardware), overrides)


def _quantization(args: argparse.Namespace, values: dict) -> Quantization:
    quantized = args.weights != "fp16"
    require(args.dqb_link == "expanded" or args.dequant == "dqb", "--dqb-link applies to --dequant dqb only")
    group = args.group_size if args.group_size is not None else (128 if quantized else 0)
    return Quantization(args.weights, group, args.dequant, args.kernel, args.activations,
                        link_expanded=args.dqb_link == "expanded", kernel_model=args.kernel_model)


def _memory(args: argparse.Namespace, values: dict) -> str | Layout:
    return resolve_layout(args.memory) or "hbm"


def _hbf(args: argparse.Namespace, values: dict) -> HBFOptions:
    """Refused without a layout that puts something in HBF (no effect)."""
    given = [flag for flag in HBF_FLAGS if getattr(args, flag) is not None]
    layout = values["memory"]
    if given and not (isinstance(layout, Layout) and layout.uses_hbf):
        raise ConfigError(f"--{given[0].replace('_', '-')} needs a --memory layout that puts something in HBF (B, C "
                          f"or a file)")
    finite(args, "hbf_read_us", "frame_cache_gb", "ambient_c", "routing_skew")
    require(args.routing_skew is None or args.routing_skew >= 0,
            f"--routing-skew must be >= 0, got {args.routing_skew}")
    require(args.routing_skew is None or args.routing_trace is None,
            "--routing-skew shapes the seeded routing model; --routing-trace replaces it: give one")
    return HBFOptions(grade=1 if args.hbf_grade is None else args.hbf_grade,
                      read_s=None if args.hbf_read_us is None else args.hbf_read_us * 1e-6,
                      frame_cache_gib=args.frame_cache_gb, prefetch=args.prefetch or "none",
                      ambient_c=45.0 if args.ambient_c is None else args.ambient_c,
                      routing_skew=args.routing_skew or 0.0, routing_trace=args.routing_trace, seed=args.seed)


def _pools() -> tuple[Option, ...]:
    pools = tuple(Option(f"--{flag}", f"--system {'pd' if flag.startswith(('prefill', 'decode')) else 'colocated'}: "
                                      f"{flag.replace('-', ' ')}", metavar="N", type=int)
                  for flag in ("prefill-instances", "prefill-tp", "decode-instances", "decode-tp", "instances", "tp"))
    return pools + (
        Option("--scheduler", lambda: f"--system colocated: {_listed(SCHEDULERS)} (default sarathi; "
                                      f"docs/reference/configuration.md)", metavar="NAME"),
        Option("--router", lambda: f"--system colocated: {_listed(ROUTERS)} (default round-robin)", metavar="NAME"))


def _lengths() -> tuple[Option, ...]:
    return tuple(option for name in ("input", "output") for option in (
        Option(f"--{name}-dist", f"with --qps: {name} length distribution: fixed, normal (default), lognormal, "
                                 f"uniform, exponential (cv from --length-cv)", metavar="KIND"),
        Option(f"--{name}-range", f"with --qps: clip {name} lengths to this range", metavar="MIN:MAX")))


@dataclass(frozen=True, kw_only=True)
class SimulationConfig:
    """What one simulation runs: names or resolved objects for its inputs (`resolve` turns names into objects)."""
    system: str = field(metadata=options(
        Option("--system", lambda: f"serving system: {', '.join(SYSTEMS)}, pd (pools from --prefill-instances, "
                                   f"--prefill-tp, --decode-instances, --decode-tp) or colocated (--instances, --tp)",
               required=True),
        *_pools(), read=_system))
    model: str | LLM = field(metadata=options(
        Option("--model", lambda: f"model preset ({', '.join(MODEL_PRESETS)}; any case) or the path of a Hugging "
                                  f"Face config.json", required=True),
        read=lambda args, values: resolve_model(args.model)))
    max_batch: int = field(default=16, metadata=options(
        Option("--batch", "the systems' maximum decode batch (default 16)", metavar="N", type=int, default=16),
        check=at_least(1, "max batch")))
    workload: object = field(metadata=options(
        Option("--input-len", "prompt tokens per request (the mean with --qps; default 16384)", metavar="N", type=int,
               default=16384),
        Option("--output-len", "output tokens per request (the mean with --qps; default 128)", metavar="N", type=int,
               default=128),
        Option("--requests", "requests to simulate (default: --batch without --qps, 1000 with it)", metavar="N",
               type=int),
        Option("--qps", "Poisson arrivals at X requests/s, lengths drawn around the means", metavar="X", type=float),
        Option("--length-cv", "with --qps: coefficient of variation of both lengths (default 0.1: the paper gives no "
                              "spread, see sysmodel/workload.py)", metavar="X", type=float),
        Option("--seed", "random seed of the Poisson arrivals and lengths (default 0)", metavar="N", type=int,
               default=0),
        Option("--trace", "replay a CSV/JSONL/JSON trace in a public format (docs/guides/traces.md) or a shipped one: "
                          "azure-conv-2023, azure-code-2023", metavar="FILE|NAME"),
        Option("--arrivals", "with --trace: trace (default: its arrival column, required) or none (every request at "
                             "t = 0)", choices=("trace", "none")),
        Option("--trace-repeat", "with --trace: play it N times end to end at its mean rate (24 x an hour = a day)",
               metavar="N", type=int),
        Option("--arrival-cv", "with --qps: Gamma inter-arrivals with this coefficient of variation (1 = Poisson)",
               metavar="X", type=float),
        *_lengths(), read=_workload))
    hardware: str | Hardware = field(default="paper", metadata=options(
        Option("--hardware", lambda: f"hardware preset: {', '.join(PRESETS)} (8 GPUs each; --hw overrides fields on "
                                     f"top)", metavar="NAME", default="paper"),
        Option("--hw", "override a hardware field by its dotted name, e.g. gpu.stack.bandwidth=4e12, pnm.lanes=32, "
                       "gpus=4, link.bandwidth=1.8e12 (repeatable; see sysmodel/hardware.py)", metavar="FIELD=VALUE",
               action="append"),
        read=_hardware))
    decode_hardware: str | Hardware | None = field(default=None, metadata=options(Option(
        "--decode-hardware", "--system pd / pd-*: the decode pool's hardware preset (the prefill pool runs on "
                             "--hardware; the KV crosses the network between them; the same machine as --hardware "
                             "is one pool of both)", metavar="NAME")))
    perf_model: str = field(default="roofline", metadata=options(Option(
        "--perf-model", lambda: f"how long a GPU operator takes: {_listed(PERF_MODELS)} (default roofline); see "
                                f"docs/design/fidelity.md", metavar="NAME", default="roofline")))
    all_reduce: str = field(default="bandwidth", metadata=options(Option(
        "--allreduce", f"roofline all-reduce: {_listed(ALL_REDUCE_MODELS)} (default bandwidth: ring bytes over the "
                       f"link; alpha-beta adds NCCL's latencies; nvls takes the faster of that ring and NVLink SHARP "
                       f"where the NVSwitch has it); see docs/design/fidelity.md",
        metavar="MODEL", default="bandwidth")))
    overlap: bool = field(default=False, metadata=options(Option(
        "--allreduce-overlap", "overlap tensor-parallel all-reduces with compute (a layer takes the longer of the "
                               "two)", action="store_true", default=False)))
    iteration_overhead_s: float = field(default=0.0, metadata=options(
        Option("--iteration-overhead", "host time every GPU iteration adds (scheduling, sampling, launches), "
                                       "seconds; default 0, as the papers' systems (docs/design/pim-baselines.md)",
               metavar="SECONDS", type=float, default=0.0),
        check=lambda seconds: None if isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0
        else f"iteration overhead must be a finite number of seconds >= 0, got {seconds}"))
    mmu_policy: str = field(default="prefill-first", metadata=options(
        Option("--mmu-policy", f"duopd only: HBM arbitration between GPU and PNM, {_listed(POLICIES)} (default "
                               f"prefill-first)", metavar="POLICY"),
        read=_for_some_systems("mmu_policy", "prefill-first"),
        check=lambda policy: None if policy in POLICIES else
        f"unknown MMU policy {policy!r}; choose one of {', '.join(POLICIES)}"))
    chunk_tokens: int | None = field(default=None, metadata=options(
        Option("--chunk-tokens", "prompt tokens per iteration: chunked, gpu and colocated split prompts into chunks "
                                 "of N (default 1024, 4096 for MoE); duopd, pd-* and sm-* prefill whole prompts, "
                                 "first come first served, up to N tokens together (default: one prompt)",
               metavar="N", type=int),
        read=_for_some_systems("chunk_tokens", None),
        check=lambda tokens: None if tokens is None or tokens >= 1 else "chunk size must be >= 1 token"))
    quantization: Quantization = field(default=Quantization(), metadata=options(
        Option("--weights", "weight format: fp16 (default), w4a16, w8a16 (GPTQ/AWQ integers) or fp8 (E4M3)",
               metavar="FORMAT", default="fp16"),
        Option("--group-size", "quantized weights: weights per scale/zero group (default 128)", metavar="G",
               type=int),
        Option("--dequant", "quantized weights: dqb (StreamDQ's near-memory block), gpu-fused, gpu-split, or gpu "
                            "(the kernel family's own switch)", metavar="WHERE"),
        Option("--kernel", "GPU-side dequantization kernel family: gptq, awq-v1, awq-v2 or torchao", metavar="FAMILY"),
        Option("--activations", "activation and dequantized-weight format: fp16 (default) or bf16", metavar="FORMAT",
               default="fp16"),
        Option("--kernel-model", "quantized weights: price the GPU's GEMM kernels by their instruction-count roofline "
                                 "(default) or as measured (public benchmarks; docs/results/fidelity-studies.md)",
               default="roofline", choices=("roofline", "measured")),
        Option("--dqb-link", "--dequant dqb: the die-to-die link carries the expanded 16-bit weights at the stack's "
                             "bandwidth (default), or is assumed not to bind", default="expanded",
               choices=("expanded", "unbounded")),
        read=_quantization))
    memory: str | Layout = field(default="hbm", metadata=options(Option(
        "--memory", lambda: f"package per GPU: hbm (default, the hardware's own HBM), the layouts "
                            f"{', '.join(LAYOUTS)}, or a layout .toml/.json file", metavar="LAYOUT", default="hbm"),
        read=_memory, group=HBF_GROUP))
    hbf: HBFOptions = field(default=HBFOptions(), metadata=options(
        Option("--hbf-grade", "HBF bandwidth grade 1, 2 or 3 (default 1)", metavar="N", type=int),
        Option("--hbf-read-us", "HBF page read time tR (default 20)", metavar="X", type=float),
        Option("--frame-cache-gb", "HBM frame cache for HBF pages, GiB per GPU (default: the layout's)", metavar="X",
               type=float),
        Option("--prefetch", "none (default), next-layer or moe-speculative", metavar="MODE"),
        Option("--ambient-c", "coolant temperature (default 45 C)", metavar="T", type=float),
        Option("--routing-skew", "MoE expert popularity ~ rank^-S (default 0: uniform)", metavar="S", type=float),
        Option("--routing-trace",
               "replay MoE routing from FILE instead of the seeded model (format: docs/design/hbf.md)", metavar="FILE"),
        read=_hbf, group=HBF_GROUP))
    shared_prefix_tokens: int = field(default=0, metadata=options(
        Option("--shared-prefix-tokens", "every prompt starts with the same N tokens, their KV stored once (per "
                                         "instance) in the layout's prefix tier and read by every request; prefill "
                                         "computes the rest (in HBF: chunked/gpu; default 0)",
               metavar="N", type=int, default=0),
        check=lambda tokens: None if isinstance(tokens, int) and tokens >= 0 else
        f"shared prefix must be >= 0 tokens, got {tokens}", group=HBF_GROUP))
    power_source: str = field(default="synthesized", metadata=options(
        Option("--power-source", "the PNM's and the DQB's power: synthesized (default: the synthesis table, "
                                 "docs/results/ppa.md; a stale or missing entry is refused) or paper (DuoPD's 6.45 W "
                                 "per stack or --hw pnm.power_w, StreamDQ's 0.355 W per DQB)",
               default="synthesized", choices=POWER_SOURCES),
        check=lambda source: None if source in POWER_SOURCES else
        f"unknown power source {source!r}; choose one of {', '.join(POWER_SOURCES)}"))

    def __post_init__(self) -> None:
        check_fields(self)


def resolve(config: SimulationConfig, table: verified.VerifiedBlocks | None = None) -> Setting:
    """The `Setting` of `config`: each named input resolved once; `table` defaults to the committed verified
    figures (refused when stale). A decode pool on the same machine as the prefill pool is one machine."""
    spec = parse(config.system)
    model = config.model if isinstance(config.model, LLM) else resolve_model(config.model)
    machine = hardware = resolve_hardware(config.hardware)
    layout = config.memory if isinstance(config.memory, Layout) else resolve_layout(config.memory)
    if layout is not None:
        if config.hbf.frame_cache_gib is not None:
            layout = replace(layout, frame_cache_gib=config.hbf.frame_cache_gib)
        hardware = layout.hardware(hardware)
    decode_hardware = None if config.decode_hardware is None else resolve_hardware(config.decode_hardware)
    if decode_hardware is machine:
        decode_hardware = None
    require(decode_hardware is None or isinstance(spec, Disaggregated),
            f"a decode pool on other hardware applies to PD deployments (pd, pd:PxT+DxU), not {config.system}")
    require(decode_hardware is None or layout is None, "HBF layouts with a separate decode machine are not modelled")
    return Setting(config=config, spec=spec, hardware=hardware, model=model, layout=layout,
                   decode_hardware=decode_hardware, table=table if table is not None else verified.load())
