"""The ProfileTrigger CRD's CEL validation rules, in one table.

The trigger's targets and its session template's storage follow the session's own rules (`crd_rules.RULES`, placed
at the same paths), so a session a trigger would create can never be refused for a reason the trigger was not; the
rest mirror the pydantic validators of `trigger.py`. A trigger's spec may change (it is read at every evaluation).
"""

from __future__ import annotations

from stepscope_contract.crd_rules import RULES, CelRule, cel_regex
from stepscope_contract.trigger import CRON_PATTERN

TEMPLATE_SPEC = ("sessionTemplate", "spec")


def _shared_rules() -> tuple[CelRule, ...]:
    """The session's validation rules of targets and storage, at the trigger's paths for them."""
    out: list[CelRule] = []
    for rule in RULES:
        if rule.transition:
            continue  # a trigger's spec is not frozen
        if rule.path[0] == "targets":
            out.append(rule)
        elif rule.path[0] == "storage":
            out.append(
                CelRule(TEMPLATE_SPEC + rule.path, rule.rule, rule.message, rule.message_expression, rule.replaces)
            )
    return tuple(out)


TRIGGER_RULES: tuple[CelRule, ...] = (
    *_shared_rules(),
    CelRule(
        (),
        "has(self.schedule) || (has(self.conditions) && (has(self.conditions.stepTimeRegression) || "
        "has(self.conditions.straggler) || has(self.conditions.stall)))",
        message="set at least one of conditions.stepTimeRegression, conditions.straggler, conditions.stall or schedule",
    ),
    CelRule(
        ("schedule",),
        f"self.matches({cel_regex(CRON_PATTERN)})",
        message_expression=(
            "'\"' + self + '\" is not a cron schedule: write five fields (minute hour day-of-month month "
            'day-of-week) of numbers, ranges, lists, steps or *, such as "0 3 * * *"\''
        ),
        replaces=("pattern",),
    ),
    CelRule(
        TEMPLATE_SPEC,
        "!has(self.targets)",
        message="sessionTemplate.spec.targets must not be set: the sessions profile the trigger's spec.targets",
    ),
)
