"""Files a person opens beside the report: the merged trace of the ranks that matter and the named rank's Python
stacks in speedscope's format (built pure in merged_trace and speedscope, read and written in files)."""
