"""Process plumbing: how the rank workers start (forking), the worker pool, their heaps, and the CPU quota that
sizes the pool."""
