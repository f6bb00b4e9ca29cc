"""Test and benchmark helpers of stepscope: scenario generators and synthetic data. Not part of any image.

- `synthetic`: per-rank summaries of a synchronous job with an optional planted slow rank (pure, fast);
- `gloo_jobs`: real multi-rank gloo trainings under torch.profiler with planted faults (real traces);
- `gpu_jobs`: multi-rank GPU jobs derived from one real Kineto trace through a collective timing model;
- `corpus`: the scenario corpus (with each scenario's truth) that bench/diagnosis_accuracy.py scores.
"""
