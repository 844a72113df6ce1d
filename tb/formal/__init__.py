"""Formal proofs of the blocks' control logic (`basedie prove`): Amaranth harnesses whose assertions SymbiYosys
checks by bounded model checking and k-induction (docs/guides/formal.md)."""
