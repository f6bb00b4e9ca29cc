"""Report outputs: report.json (contract Report) and one self-contained report.html."""

from stepscope_analyzer.report.build import build_report
from stepscope_analyzer.report.html import html_bytes, render_html
from stepscope_analyzer.report.json_out import model_json_bytes
from stepscope_analyzer.report.trace_access import with_trace_links

__all__ = ["build_report", "html_bytes", "model_json_bytes", "render_html", "with_trace_links"]
