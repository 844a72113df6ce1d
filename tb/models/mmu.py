"""Reference behaviour of the DuoPD MMU, in plain Python/numpy, written from the specification (§4.3, §5.3)
and the README, never from the RTL: which PNM instructions are refused and why, the 32-byte requests an
accepted one becomes, the weighted-round-robin grant order, the memory contents a bench starts from, and
the wait statistics the figures report."""
import hashlib
from dataclasses import dataclass

import numpy as np

# Fault codes of a completion (README: DuoPD MMU arbiter).
NONE, PROTECTED, OUT_OF_RANGE, MALFORMED = 0, 1, 2, 3


@dataclass(frozen=True)
class Instruction:
    base: int      # byte address
    size: int      # bytes
    dest: int      # first PNM buffer row
    store: bool
    id: int


@dataclass(frozen=True)
class SubRequest:
    block: int     # request (32-byte block) address
    mask: int      # one bit per byte
    row: int       # PNM buffer row


def fault(instr: Instruction, *, request_bytes: int, max_sub_requests: int, buffer_rows: int,
          memory_size: int, regions: list[tuple[int, int]]) -> int:
    """Malformed beats out-of-range beats protected; a load from a protected region is allowed (§5.3)."""
    end = instr.base + instr.size
    rows = -(-instr.size // request_bytes)
    if (instr.size == 0 or instr.size > max_sub_requests * request_bytes or instr.base % request_bytes
            or instr.dest + rows > buffer_rows):
        return MALFORMED
    if end > memory_size:
        return OUT_OF_RANGE
    if instr.store and any(lo < hi and instr.base < hi and end > lo for lo, hi in regions):
        return PROTECTED
    return NONE


def sub_requests(instr: Instruction, request_bytes: int) -> list[SubRequest]:
    """The requests of an accepted instruction, in issue order; only the bytes of the tensor are enabled."""
    full = (1 << request_bytes) - 1
    out = []
    for k, offset in enumerate(range(0, instr.size, request_bytes)):
        valid_bytes = min(request_bytes, instr.size - offset)
        out.append(SubRequest(block=(instr.base + offset) // request_bytes,
                              mask=full >> (request_bytes - valid_bytes), row=instr.dest + k))
    return out


def wrr_sources(weight_gpu: int, weight_pnm: int, grants: int) -> list[str]:
    """Grant order of the mixed policy while both sources always want: weight_gpu GPU grants, then
    weight_pnm PNM grants, repeating (starting with the GPU after reset)."""
    period = ["gpu"] * weight_gpu + ["pnm"] * weight_pnm
    return [period[k % len(period)] for k in range(grants)]


def block_data(address: int, bits: int) -> int:
    """Deterministic, address-unique contents of a `bits`-bit word: what memory (or the PNM buffer) holds
    before a bench writes it. A SHAKE-128 digest of the address: a microsecond per word, where a seeded numpy
    generator per address cost a hundred (the MMU bench reads one per request it checks)."""
    digest = hashlib.shake_128(b"mmu" + address.to_bytes(16, "little")).digest(-(-bits // 8))
    return int.from_bytes(digest, "little") & ((1 << bits) - 1)


def wait_statistics(waits) -> dict[str, float]:
    """p50, p99 and max of waiting times in cycles (numpy's linear-interpolation percentiles)."""
    waits = np.asarray(waits, dtype=float)
    if not len(waits):
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    return {"p50": round(float(np.percentile(waits, 50)), 2), "p99": round(float(np.percentile(waits, 99)), 2),
            "max": float(waits.max())}
