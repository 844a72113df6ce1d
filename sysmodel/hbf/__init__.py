"""High-Bandwidth Flash (HBF) beside HBM: the media and its provenance (`media`), package layouts (`layout`),
the HBM frame cache (`cache`), MoE routing (`routing`), package heating and throttling (`thermal`), HBFSim's
reference package solved for the study (`reference_package`), retention refresh and wear (`retention`), and the
stateful service that joins them behind a GPU executor (`service`). See docs/design/hbf.md."""
