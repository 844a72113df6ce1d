"""The HBF stack: organisation and timing after OCP HBF v0.7, each number with an evidence mark.

Marks: `standard` (OCP HBF v0.7 as summarised in the HBFSim paper and issue 14), `paper` (the HBFSim paper,
arXiv 2609.09800), `assumption` (no public figure; swept in basedie/studies/hbf.py). The provenance table in
docs/design/hbf.md lists `PROVENANCE` row for row (a test checks it), so the code and the documentation agree.
"""
from dataclasses import dataclass

from ..errors import require
from ..memory import GB, HBM4_STACK, MemoryTier

PAGE_BYTES = 4096            # standard: OCP HBF v0.7, 4 KiB pages (also KIOXIA XL-FLASH, HBFSim provenance)
READ_STEP_BYTES = 64         # standard: reads of 64 B to 4 KiB in 64 B steps, never crossing a page
CHANNELS = 16                # standard: 16 channels per stack
GRADES = {1: 384e9, 2: 1536e9, 3: 3072e9}   # standard: bandwidth grades, bytes/s per stack


@dataclass(frozen=True)
class Provenance:
    name: str
    value: str
    mark: str                # standard / paper / assumption
    source: str


@dataclass(frozen=True)
class HBFStack:
    """One HBF stack. `outstanding_reads` bounds the page reads in flight: with tR it caps the bandwidth the
    media can deliver (outstanding × page / tR), whatever the interface grade."""
    grade: int = 1
    capacity_bytes: float = 512 * GB
    read_s: float = 20e-6
    program_s: float = 100e-6
    erase_s: float = 2e-3
    outstanding_reads: int = 2048
    pages_per_block: int = 256
    read_energy_per_byte: float = 6e-12 * 8
    program_energy_per_byte: float = 4 * HBM4_STACK.energy_per_byte
    endurance_cycles: int = 3000

    def __post_init__(self) -> None:
        require(self.grade in GRADES, f"HBF grade must be one of {', '.join(map(str, GRADES))}, got {self.grade}")
        require(self.read_s > 0, f"HBF page read time must be > 0 s, got {self.read_s}")
        require(min(self.program_s, self.erase_s, self.read_energy_per_byte, self.program_energy_per_byte) >= 0,
                "HBF program/erase times and energies must be >= 0")
        require(self.capacity_bytes > 0 and self.outstanding_reads >= 1 and self.pages_per_block >= 1
                and self.endurance_cycles >= 1, "HBF capacity, outstanding reads, block size, endurance must be > 0")

    @property
    def interface_bandwidth(self) -> float:
        return GRADES[self.grade]

    @property
    def media_bandwidth(self) -> float:
        """What the outstanding page reads can deliver (Little's law)."""
        return self.outstanding_reads * PAGE_BYTES / self.read_s

    @property
    def bandwidth(self) -> float:
        return min(self.interface_bandwidth, self.media_bandwidth)

    def tier(self) -> MemoryTier:
        """The stack seen through the memory-tier interface (tR as its access latency)."""
        return MemoryTier(f"HBF stack (grade {self.grade})", self.capacity_bytes, self.bandwidth, self.read_s,
                          self.read_energy_per_byte)


def page_reads(address: int, nbytes: int) -> list[tuple[int, int, int]]:
    """The media reads for `nbytes` at `address`: (page, offset in page, length), each 64 B-aligned, a
    multiple of 64 B, at most one page, never crossing a page boundary."""
    require(address >= 0 and nbytes >= 0, "HBF reads need a non-negative address and length")
    if nbytes == 0:
        return []
    start = address // READ_STEP_BYTES * READ_STEP_BYTES
    end = -(-(address + nbytes) // READ_STEP_BYTES) * READ_STEP_BYTES
    reads = []
    while start < end:
        page, offset = divmod(start, PAGE_BYTES)
        length = min(end - start, PAGE_BYTES - offset)
        reads.append((page, offset, length))
        start += length
    return reads


OCP = "OCP HBF v0.7 (via HBFSim §2, §7 and issue 14)"
HBFSIM_PROV = "github.com/FlashLab-MBZUAI/HBFSim configs/parameter-provenance.json"
PROVENANCE = (
    Provenance("channels per stack", "16", "standard", OCP),
    Provenance("page", "4 KiB; reads 64 B-4 KiB in 64 B steps within a page; 4 KiB aligned writes", "standard",
               OCP),
    Provenance("bandwidth grades", "384 / 1,536 / 3,072 GB/s per stack", "standard", OCP),
    Provenance("capacity", "512 GB per stack", "standard", OCP + "; Sandisk HBF fact sheet 16 x 256 Gb"),
    Provenance("page read tR", "20 us (swept 1-40 us)", "paper", "HBFSim §2 ('about 20 us')"),
    Provenance("program tPROG", "100 us (OCP range 100-200 us)", "standard", OCP + "; HBFSim 95 + 5 us verify"),
    Provenance("erase tBERS", "2 ms", "standard", OCP + "; HBFSim hbf-erase-ns 2,000,000 (its own assumption)"),
    Provenance("outstanding page reads", "2,048 per stack (64 planes x 32 subarrays)", "assumption",
               HBFSIM_PROV + " (array-supply upper bound topology)"),
    Provenance("pages per erase block", "256 (1 MiB blocks)", "assumption", "no public HBF figure"),
    Provenance("read energy", "6 pJ/bit = 48 pJ/B (2.3x HBM4's 20.8 pJ/B)", "assumption",
               "HBFSim thermal-boundary overlays ('pure-read 6 pJ/bit model'); swept 1-4x HBM"),
    Provenance("program energy", "4x HBM4 per byte = 83.2 pJ/B", "assumption", "issue 14 bound (<= 4x HBM)"),
    Provenance("endurance", "3,000 P/E cycles (lifetime is a sweep, not a claim)", "assumption",
               "no public HBF figure"),
    Provenance("retention", "24 h at 85 C powered", "standard", OCP),
    Provenance("activation energy Ea", "1.04 eV", "paper", "HBFSim §8 (3D NAND after 10k P/E)"),
    Provenance("throttle thresholds", "enter Light/Severe/Shutdown at 80/90/100 C; leave Severe <= 80 C, "
               "Light <= 78 C; service 100/90/0/0 %", "paper", "open HBFSim defaults (issue 14)"),
    Provenance("Shutdown exit", "<= 80 C, to Light", "assumption", "not stated by the seed"),
    Provenance("ambient (coolant supply)", "45 C", "paper",
               "HBFSim configs/overlays/hbf/thermal-boundary-*.cfg ('45 C coolant-supply reference')"),
    Provenance("package RC constants", "see sysmodel/hbf/thermal.py PACKAGE", "assumption",
               "not fitted to HBFSim Fig. 3; compared in the study"),
    Provenance("HBM stack in layouts A/B/C", "36 GiB HBM4 12-high, 2 TB/s", "paper",
               "HBFSim §6.4 capacities (216 GiB = 6 x 36 GiB); Micron HBM4 36 GB 12-high"),
    Provenance("frame cache of B and C", "8 GiB per GPU (--frame-cache-gb)", "assumption",
               "not given by the seed; swept by the user"),
    Provenance("KV block", "16 tokens of one sequence, each layer's slice page-aligned", "assumption",
               "vLLM's default block size (docs.vllm.ai engine arguments, --block-size 16)"),
    Provenance("KV write-back", "dirty pages from the first dirty token, whole 4 KiB pages; channel time "
               "(bytes at the service rate + tPROG over the outstanding operations) not overlapped", "assumption",
               "4 KiB aligned writes are standard (OCP); the timing is an upper bound of ours"),
    Provenance("KV wear", "programs spread evenly over the KV region's erase blocks (no write amplification "
               "beyond whole pages)", "assumption", "no public HBF FTL figure"),
)
