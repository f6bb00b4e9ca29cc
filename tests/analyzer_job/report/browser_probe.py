"""Open a report.html in headless Chromium (Debian's `chromium`) and read back what a person would see.

A probe page beside the report loads it in an iframe (file://, offline) and, once it has loaded, forces layout
and records: the verdict's text and whether it is visible, the phase bars, timeline and memory marks and trace
links that are visible (and whether each link's file exists), each section's heading and the height of what it
shows, what the page requested (nothing, for a self-contained page), whether any script ran (hostile names must
stay text), and how long loading and layout took. Chromium prints the probe's DOM (--dump-dom), from which the
JSON result is read. Used by the browser tests and bench/report_browser.py.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

INSTALL_SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "install_browser.sh"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--no-first-run",
    "--disable-extensions",
    "--disable-component-update",
    "--proxy-server=http://127.0.0.1:9",  # were anything to reach for the network, it would fail
    "--allow-file-access-from-files",  # the probe reads the report's DOM and checks the linked files
)

PROBE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>probe</title></head><body>
<pre id="result">pending</pre>
<iframe id="frame" style="width: 1280px; height: 2400px; border: 0"></iframe>
<script>
const frame = document.getElementById("frame");
const started = performance.now();
function exists(url) {
  try {
    const xhr = new XMLHttpRequest();
    xhr.open("GET", url, false);
    xhr.overrideMimeType("text/plain; charset=x-user-defined");
    xhr.send();
    return xhr.responseText.length > 0;
  } catch (e) { return false; }
}
frame.addEventListener("load", () => {
  const loadedMs = performance.now() - started;
  const doc = frame.contentDocument, win = frame.contentWindow;
  const height = doc.documentElement.scrollHeight;  // forces style and layout
  const layoutMs = performance.now() - started;
  const visible = (el) => {
    if (!el) return false;
    const r = el.getBoundingClientRect(), cs = win.getComputedStyle(el);
    return r.width > 0 && r.height > 0 && cs.visibility !== "hidden" && cs.display !== "none" && cs.opacity !== "0";
  };
  const verdict = doc.querySelector("#verdict .line");
  const bars = [...doc.querySelectorAll("#phase-bars rect")].filter(visible);
  const result = {
    title: doc.title,
    verdict: verdict ? verdict.textContent : null,
    verdictVisible: visible(verdict),
    gain: (doc.getElementById("gain") || {}).textContent || null,
    phaseBars: bars.length,
    phaseColors: [...new Set(bars.map((b) => b.getAttribute("fill")))],
    stepViews: doc.querySelectorAll("[id^=steps-]").length,
    gpuLines: [...doc.querySelectorAll("#gpu ~ svg polyline")].filter(visible).length,
    timelineRects: [...doc.querySelectorAll("#step-timeline rect")].filter(visible).length,
    timelineLabels: [...doc.querySelectorAll("#step-timeline text")].filter(visible).map((t) => t.textContent),
    memoryMarks: [...doc.querySelectorAll("#memory-chart rect, #memory-chart polyline")].filter(visible).length,
    sections: [...doc.querySelectorAll("h2")].map((h) => {
      let height = 0;
      for (let el = h.nextElementSibling; el && el.tagName !== "H2"; el = el.nextElementSibling) {
        if (visible(el) && el.textContent.trim() !== "none") height += el.getBoundingClientRect().height;
      }
      return { id: h.id, title: h.textContent, visible: visible(h), contentHeight: height };
    }),
    links: [...doc.querySelectorAll("a.trace")].map((a) => ({
      href: a.getAttribute("href"), visible: visible(a), exists: exists(a.href) })),
    artifacts: [...doc.querySelectorAll("a.artifact")].map((a) => ({
      href: a.getAttribute("href"), visible: visible(a), exists: exists(a.href) })),
    text: doc.body.innerText,
    scripts: doc.scripts.length,
    images: doc.images.length,
    ran: [window.pwned === undefined ? null : window.pwned, win.pwned === undefined ? null : win.pwned],
    requested: win.performance.getEntriesByType("resource").map((e) => e.name),
    elements: doc.getElementsByTagName("*").length,
    height: height,
    loadedMs: loadedMs,
    layoutMs: layoutMs,
  };
  document.getElementById("result").textContent = JSON.stringify(result);
});
frame.src = "REPORT";
</script>
</body></html>
"""
_RESULT = re.compile(r'<pre id="result">(.*?)</pre>', re.DOTALL)


def find_chromium() -> str | None:
    return os.environ.get("STEPSCOPE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def ensure_chromium() -> tuple[str | None, str]:
    """(path, '') when Chromium is there or could be installed (tools/install_browser.sh), else (None, why)."""
    found = find_chromium()
    if found:
        return found, ""
    try:
        done = subprocess.run(["sh", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"headless Chromium is missing and could not be installed: {exc}"
    found = find_chromium()
    if found:
        return found, ""
    return None, f"headless Chromium is missing and could not be installed: {done.stdout[-300:]}{done.stderr[-500:]}"


def run_chromium(chromium: str, url: str, *extra: str, timeout: float = 120) -> tuple[str, float]:
    """(stdout, wall seconds) of one headless Chromium run with its own profile folder."""
    with tempfile.TemporaryDirectory(prefix="stepscope-chromium-") as profile:
        cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", *extra, url]
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout, wall


def probe(chromium: str, report_html: Path) -> dict[str, Any]:
    """What headless Chromium shows of `report_html` (the probe page is written beside it, then removed)."""
    page = report_html.parent / f".probe-{os.getpid()}.html"
    page.write_text(PROBE.replace("REPORT", report_html.name), encoding="utf-8")
    try:
        out, wall = run_chromium(chromium, page.resolve().as_uri(), "--dump-dom")
    finally:
        page.unlink(missing_ok=True)
    match = _RESULT.search(out)
    if match is None or match.group(1) == "pending":
        raise RuntimeError(f"the probe did not finish: {out[-2000:]}")
    result: dict[str, Any] = json.loads(html.unescape(match.group(1)))
    result["wallSeconds"] = wall
    return result


def screenshot(chromium: str, report_html: Path, png: Path, height: int = 4000) -> None:
    """A PNG of the page's first `height` pixels at 1280 px wide (to look at it while developing)."""
    run_chromium(chromium, report_html.resolve().as_uri(), f"--screenshot={png}", f"--window-size=1280,{height}")
