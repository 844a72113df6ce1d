"""System-level LLM-serving simulation on verified block figures (numpy only, never cocotb)."""
