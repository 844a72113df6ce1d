"""The MMU's golden model (`tb/models/mmu.py`) against hand-worked values."""
from tb.models import mmu as model


def test_protection_and_decomposition_by_hand() -> None:
    limits = dict(request_bytes=32, max_sub_requests=32, buffer_rows=1024, memory_size=4096,
                  regions=[(1024, 2048), (0, 0)])
    def instr(base: int, size: int, store: bool, dest: int = 0) -> model.Instruction:
        return model.Instruction(base=base, size=size, dest=dest, store=store, id=0)

    assert model.fault(instr(1024, 32, True), **limits) == model.PROTECTED
    assert model.fault(instr(992, 64, True), **limits) == model.PROTECTED      # overlaps the region's start
    assert model.fault(instr(2048, 32, True), **limits) == model.NONE          # the limit is exclusive
    assert model.fault(instr(1024, 1024, False), **limits) == model.NONE       # loads may read parameters
    assert model.fault(instr(4064, 33, False), **limits) == model.OUT_OF_RANGE
    assert model.fault(instr(4064, 32, False), **limits) == model.NONE
    assert model.fault(instr(16, 32, False), **limits) == model.MALFORMED      # unaligned base
    assert model.fault(instr(0, 1025, False), **limits) == model.MALFORMED     # more than 32 requests
    assert model.fault(instr(0, 64, False, dest=1023), **limits) == model.MALFORMED  # rows overflow
    assert model.sub_requests(instr(64, 70, False, dest=5), 32) == [
        model.SubRequest(2, 0xFFFFFFFF, 5), model.SubRequest(3, 0xFFFFFFFF, 6), model.SubRequest(4, 0x3F, 7)]


def test_wrr_order_and_wait_statistics() -> None:
    assert "".join(s[0] for s in model.wrr_sources(3, 1, 9)) == "gggpgggpg"
    stats = model.wait_statistics(list(range(101)))
    assert (stats["p50"], stats["p99"], stats["max"]) == (50.0, 99.0, 100.0)


def test_block_data_is_a_fixed_word_of_the_width_asked_different_per_address() -> None:
    words = [model.block_data(address, 64) for address in range(10_000)]
    assert words == [model.block_data(address, 64) for address in range(10_000)]
    assert len(set(words)) == len(words) and all(0 <= w < 1 << 64 for w in words)
    assert max(words) >= 1 << 63  # the top bit is used, not only the low ones
    assert all(0 <= model.block_data(a, 12) < 1 << 12 for a in range(100))
    wide = model.block_data(1 << 40, 256)
    assert 200 < wide.bit_length() <= 256 and wide != model.block_data(1 << 41, 256)
