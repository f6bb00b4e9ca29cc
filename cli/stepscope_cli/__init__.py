"""The `stepscope` console script: one entry that dispatches to each component's main."""
