"""Hardware: Amaranth components only. `registry.BLOCKS` lists what `basedie generate` can build."""
