"""Quantized weights as the base die stores them: GPTQ/AWQ checkpoints read and repacked into the DQB's
pseudo-channel layout (what a deployment writes to HBM; the benches use it as stimulus)."""
