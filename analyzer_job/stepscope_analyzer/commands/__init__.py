"""The analyzer's commands: `stepscope analyze` (storage in, files out), the analyzer Job (storage in, storage out,
the same program), its gate step and the cleanup Job."""
