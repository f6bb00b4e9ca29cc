"""Process plumbing: the fork server the rank workers start from, the worker pool, and the CPU quota that sizes it."""
