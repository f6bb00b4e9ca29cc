"""stepscope in-process hook: loaded through sitecustomize, captures N steps with torch.profiler."""
