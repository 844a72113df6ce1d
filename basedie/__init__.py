"""basedie: logic for the HBM base die, verified cycle-accurately and used in LLM-serving simulation."""
