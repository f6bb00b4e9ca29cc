"""The regression gate: compare a candidate run with a baseline (`stepscope diff`).

diff_reports (compare.py) is pure: two contract Reports in, a contract DiffResult out; sides.py turns a source
into a Report, page.py draws diff.html, command.py is the command line.
"""

from stepscope_analyzer.diff.compare import DiffConfig, diff_reports
from stepscope_analyzer.diff.page import diff_html_bytes, render_diff_html
from stepscope_analyzer.diff.sides import SideError, load_side

__all__ = ["DiffConfig", "SideError", "diff_html_bytes", "diff_reports", "load_side", "render_diff_html"]
