"""The studies: each regenerates one paper's results (or the composed base die's) with `sysmodel` and writes
headline Markdown, CSV tables and plots under build/study/. `basedie study NAME [OPTIONS]` runs one, as does
`python -m basedie.studies.NAME`; a new study is one module with a `main(argv)` and one line in `STUDIES`."""

STUDIES: dict[str, tuple[str, str]] = {}
"""Study name → (the module that runs it, what it does). A plain dict, not `sysmodel.registry.Registry`: the
command line lists the studies without importing the system model, and a study's module is imported only when
it runs (the studies draw plots)."""
STUDIES["duopd"] = ("basedie.studies.duopd", "DuoPD's Figs. 9 and 11-16 beside the paper's claims")
STUDIES["streamdq"] = ("basedie.studies.streamdq", "StreamDQ's Figs. 1 and 16-18 beside the paper's claims")
STUDIES["hbf"] = ("basedie.studies.hbf", "HBFSim's capacity, bandwidth, thermal and MoE results")
STUDIES["base-die"] = ("basedie.studies.base_die",
                      "PD, DuoPD, the DQBs and HBF alone and composed on one base die, on the same requests")
STUDIES["fidelity"] = ("basedie.studies.fidelity",
                      "docs/results/fidelity-studies.md from finished StreamDQ and HBF study folders")
STUDIES["prefill-batching"] = ("basedie.studies.prefill_batching",
                              "how much of the DuoPD Fig. 15 deviation one prompt per prefill iteration explains")
