"""Kubernetes API errors, rendered as `kind: Status` bodies."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An API failure with the HTTP code, reason and message the apiserver would send."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        causes: list[dict[str, str]] | None = None,
        details: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes or []
        self.details = details or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.causes or self.details:
            body["details"] = {**self.details, "causes": self.causes}
        return body


def not_found(what: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{what} "{name}" not found')


def already_exists(what: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{what} "{name}" already exists')


def conflict(what: str, name: str, detail: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {what} "{name}": {detail}')


def invalid(what: str, name: str, errors: list[tuple[str, str]]) -> ApiError:
    """422 naming each failing field, like the apiserver's `... is invalid: spec.x: ...` message."""
    parts = [f"{field}: {msg}" for field, msg in errors]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    causes = [{"reason": "FieldValueInvalid", "message": msg, "field": field} for field, msg in errors]
    kind, _, group = what.partition(".")
    details = {"name": name, "group": group, "kind": kind}
    return ApiError(422, "Invalid", f'{what} "{name}" is invalid: {joined}', causes, details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
