"""The hardware tool flow behind `basedie generate`, `verify`, `synth` and `prove`: Verilator and Icarus
builds and bench runs, the verified table's runs, Yosys synthesis, SymbiYosys proofs."""
