"""stepscope analyzer: Kineto trace parsing, per-rank summaries, diagnosis, report."""
