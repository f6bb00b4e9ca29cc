"""stepscope sidecar agent: control API, NVML sampler, uploader."""
