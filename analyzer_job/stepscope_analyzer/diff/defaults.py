"""`stepscope diff`'s defaults that its command line shows without loading the comparison."""

DIFF_TOP_N = 500
"""names kept per rank and category when the diff analyses traces (a report.json keeps its own --top-n)"""
