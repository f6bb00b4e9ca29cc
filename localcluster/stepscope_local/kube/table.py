"""Server-side Table rendering (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`)."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from stepscope_local.kube.resources import ResourceType

_NAME_COLUMN = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name of the resource",
    "priority": 0,
}
_AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "priority": 0}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def jsonpath(obj: Any, path: str) -> Any:
    """Simple JSONPaths: `.a.b`, `.a[0].b`, `.a[*].b`, `.a[?(@.type=="Ready")].status`, `{...}` wrapper."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    tokens = re.findall(r"\.([A-Za-z0-9_\-/]+)|\[([^\]]+)\]", path)
    nodes: list[Any] = [obj]
    for name, bracket in tokens:
        nxt: list[Any] = []
        for node in nodes:
            if name:
                if isinstance(node, dict) and name in node:
                    nxt.append(node[name])
            elif not isinstance(node, list):
                continue
            elif bracket == "*":
                nxt.extend(node)
            elif bracket.lstrip("-").isdigit():
                idx = int(bracket)
                if -len(node) <= idx < len(node):
                    nxt.append(node[idx])
            else:
                m = re.match(r"\?\(@\.([A-Za-z0-9_.]+)\s*==\s*['\"]?([^'\"]*)['\"]?\)", bracket)
                if m:
                    key, want = m.groups()
                    nxt.extend(item for item in node if str(jsonpath(item, "." + key)) == want)
        nodes = nxt
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else nodes


def human_duration(seconds: float) -> str:
    """The apiserver's short age format (k8s.io/apimachinery duration.HumanDuration)."""
    s = max(0, int(seconds))
    m, h = s // 60, s // 3600
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    return f"{h // 24}d"


def _age(ts: Any) -> str:
    if not isinstance(ts, str) or not ts:
        return "<unknown>"
    try:
        when = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return ts
    return human_duration((dt.datetime.now(dt.UTC) - when).total_seconds())


def _cell(column: dict[str, Any], obj: dict[str, Any]) -> Any:
    value = jsonpath(obj, column.get("jsonPath", ""))
    if column.get("type") == "date":
        return _age(value) if value is not None else None
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    if column.get("type") == "string":
        return str(value) if not isinstance(value, bool) else ("true" if value else "false")
    return value


def _pod_columns(obj: dict[str, Any]) -> list[Any]:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    containers = (obj.get("spec") or {}).get("containers") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    phase = (obj.get("status") or {}).get("phase", "Pending")
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    status = obj.get("status") or {}
    return [f"{ready}/{len(containers)}", phase, restarts, status.get("podIP"), (obj.get("spec") or {}).get("nodeName")]


def _job_columns(obj: dict[str, Any]) -> list[Any]:
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = "Complete" if conds.get("Complete") == "True" else "Failed" if conds.get("Failed") == "True" else "Running"
    return [state, f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}"]


# ---- events: the columns `kubectl get events` shows (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE) -------------------
_EVENT_COLUMNS = (
    ("Last Seen", 0),
    ("Type", 0),
    ("Reason", 0),
    ("Object", 0),
    ("Subobject", 1),
    ("Source", 1),
    ("Message", 0),
    ("First Seen", 1),
    ("Count", 1),
    ("Name", 1),
)


def _is_event(rtype: ResourceType) -> bool:
    return rtype.kind == "Event" and rtype.group in ("", "events.k8s.io")


def _event_columns(obj: dict[str, Any]) -> list[Any]:
    """The cells of one Event, core/v1 or events.k8s.io/v1 (regarding/note/series instead of involvedObject...)."""
    meta = obj.get("metadata") or {}
    regarding = obj.get("involvedObject") or obj.get("regarding") or {}
    series = obj.get("series") or {}
    count = int(obj.get("count") or obj.get("deprecatedCount") or series.get("count") or 1)
    first = obj.get("firstTimestamp") or obj.get("deprecatedFirstTimestamp") or obj.get("eventTime")
    first = first or meta.get("creationTimestamp")
    last = series.get("lastObservedTime") or obj.get("lastTimestamp") or obj.get("deprecatedLastTimestamp")
    last = last or obj.get("eventTime") or first
    last_seen = _age(last)
    if count > 1:
        last_seen = f"{last_seen} (x{count} over {_age(first)})"
    source = obj.get("source") or {}
    source_text = obj.get("reportingController") or source.get("component") or ""
    if source.get("host"):
        source_text = f"{source_text}, {source['host']}"
    kind = str(regarding.get("kind", "")).lower()
    return [
        last_seen,
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{kind}/{regarding.get('name', '')}",
        regarding.get("fieldPath", ""),
        source_text,
        obj.get("message", obj.get("note", "")),
        _age(first),
        count,
        meta.get("name", ""),
    ]


def columns_for(rtype: ResourceType) -> list[dict[str, Any]]:
    if _is_event(rtype):
        return [{"name": n, "type": "string", "priority": p} for n, p in _EVENT_COLUMNS]
    if rtype.printer_columns:
        cols = [dict(c) for c in rtype.printer_columns]
        return [_NAME_COLUMN, *cols]
    if rtype.plural == "pods" and rtype.group == "":
        extra = [("Ready", 0), ("Status", 0), ("Restarts", 0), ("IP", 1), ("Node", 1)]
        return [_NAME_COLUMN, *({"name": n, "type": "string", "priority": p} for n, p in extra), _AGE_COLUMN]
    if rtype.plural == "jobs" and rtype.group == "batch":
        extra = [("Status", 0), ("Completions", 0)]
        return [_NAME_COLUMN, *({"name": n, "type": "string", "priority": p} for n, p in extra), _AGE_COLUMN]
    return [_NAME_COLUMN, _AGE_COLUMN]


def row(rtype: ResourceType, obj: dict[str, Any], include_object: str) -> dict[str, Any]:
    cells: list[Any] = [obj.get("metadata", {}).get("name")]
    if _is_event(rtype):
        cells = _event_columns(obj)
    elif rtype.printer_columns:
        cells += [_cell(c, obj) for c in rtype.printer_columns]
    else:
        if rtype.plural == "pods" and rtype.group == "":
            cells += _pod_columns(obj)
        elif rtype.plural == "jobs" and rtype.group == "batch":
            cells += _job_columns(obj)
        cells.append(_age(obj.get("metadata", {}).get("creationTimestamp")))
    if include_object == "None":
        embedded: Any = None
    elif include_object == "Object":
        embedded = obj
    else:
        embedded = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata", {}),
        }
    return {"cells": cells, "object": embedded}


def table(
    rtype: ResourceType, objs: list[dict[str, Any]], resource_version: str, include_object: str
) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": c["name"],
                "type": c.get("type", "string"),
                "format": c.get("format", ""),
                "description": c.get("description", ""),
                "priority": int(c.get("priority", 0)),
            }
            for c in columns_for(rtype)
        ],
        "rows": [row(rtype, o, include_object) for o in objs],
    }
