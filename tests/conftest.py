"""The `verilator` marker: a test carrying it builds a block with Verilator (or lints with it) or runs a cocotb
bench (under Verilator or Icarus). `pytest -m "not verilator"` runs everything else: the golden models, the
parameter checks, the Amaranth-simulator unit tests, the system model and the CLI's argument checks."""


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "verilator: builds with Verilator or runs a cocotb bench (minutes, not seconds)")
