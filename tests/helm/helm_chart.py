"""Rendering the chart with the pinned helm binary, and picking objects out of the result."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "stepscope"
HELM = REPO / ".tools" / "helm"
CI_VALUES = Path(__file__).resolve().parent / "ci-values.yaml"
RELEASE_NAMESPACE = "stepscope-system"


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=180, check=False)


_CACHE: dict[tuple[Any, ...], list[dict[str, Any]]] = {}


def render(*values_files: Path, sets: tuple[str, ...] = (), include_crds: bool = False) -> list[dict[str, Any]]:
    """`helm template` of the chart in RELEASE_NAMESPACE (cached per arguments)."""
    key = (values_files, sets, include_crds)
    if key not in _CACHE:
        args = ["template", "stepscope", str(CHART), "--namespace", RELEASE_NAMESPACE]
        for f in values_files:
            args += ["--values", str(f)]
        for s in sets:
            args += ["--set", s]
        if include_crds:
            args.append("--include-crds")
        result = run_helm(*args)
        assert result.returncode == 0, result.stderr
        _CACHE[key] = [d for d in yaml.safe_load_all(result.stdout) if d]
    return _CACHE[key]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{kind} *{name_suffix}: {[d['metadata']['name'] for d in found]}"
    return found[0]


Rule = tuple[str, str, str]  # (apiGroup, resource, verb); a rule limited by name: resource "secrets:a,b"
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")


def rules_of(role: dict[str, Any]) -> set[Rule]:
    out: set[Rule] = set()
    for rule in role.get("rules") or []:
        assert "nonResourceURLs" not in rule
        names = rule.get("resourceNames")
        for group in rule["apiGroups"]:
            for resource in (f"{r}:{','.join(names)}" if names else r for r in rule["resources"]):
                for verb in rule["verbs"]:
                    out.add((group, resource, verb))
    return out


def grants(docs: list[dict[str, Any]], account: str, namespace: str) -> dict[tuple[str, str | None], set[Rule]]:
    """What a ServiceAccount may do, per (scope, namespace): ('cluster', None) or ('namespace', ns)."""
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs if d["kind"] in ROLE_KINDS
    }
    out: dict[tuple[str, str | None], set[Rule]] = {}
    for binding in (d for d in docs if d["kind"] in BINDING_KINDS):
        subjects = binding["subjects"]
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == account and s["namespace"] == namespace for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        role_ns = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_ns, ref["name"])]
        scope = (
            ("cluster", None)
            if binding["kind"] == "ClusterRoleBinding"
            else ("namespace", binding["metadata"]["namespace"])
        )
        out.setdefault(scope, set()).update(rules_of(role))
    return out
