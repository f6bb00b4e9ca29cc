#!/bin/sh
# The regression gate of a CI pipeline (docs/ci.md): apply a ProfileSession that names a baseline, wait until it has
# finished (whatever the outcome: condition Finished), print its numbers and exit
#   0  the steps are not slower than the baseline by more than spec.gate.maxRegressionPercent (Regressed=False),
#      or the session names no baseline: it is the baseline run (the one later sessions compare with)
#   1  they are (Regressed=True), or the gate could not decide (Regressed Unknown: no baseline, too few steps)
#   2  the session failed (no report), or it did not finish within GATE_TIMEOUT
# usage: gate.sh SESSION.yaml SESSION_NAME    (NAMESPACE, GATE_TIMEOUT and KUBECTL from the environment)
set -eu
manifest="$1"
name="$2"
ns="${NAMESPACE:-default}"
kubectl="${KUBECTL:-kubectl}"

$kubectl apply -n "$ns" -f "$manifest"
if ! $kubectl wait -n "$ns" --for=condition=Finished --timeout="${GATE_TIMEOUT:-30m}" "profilesession/$name"; then
  echo "gate: $name did not finish in time"
  exit 2
fi
get() { $kubectl get -n "$ns" "profilesession/$name" -o "jsonpath=$1"; }
phase=$(get '{.status.phase}')
echo "phase:        $phase: $(get '{.status.message}')"
echo "step:         median $(get '{.status.summary.medianStepMs}') ms, p90 $(get '{.status.summary.p90StepMs}') ms"
report=$(get '{.status.reportURL}')
echo "report:       $report"
if [ "$phase" = Failed ]; then
  echo "gate: no decision: no report"
  exit 2
fi
if [ -z "$(get '{.spec.baseline}')" ]; then  # the run that records the baseline names none: nothing to compare
  echo "gate: this is the baseline run ($name): later sessions name it in spec.baseline.session"
  exit 0
fi
regressed=$(get '{.status.conditions[?(@.type=="Regressed")].status}')
level=$(get '{.spec.gate.confidence}')
level=$(awk -v c="${level:-0.9}" 'BEGIN { printf "%g%% interval (its lower end: %g%% confidence)", 100 * c, 50 * (1 + c) }')
# the numbers the gate decided on (its result and figure end the phase line's message: told once): Regressed=True
# when the lower end of either interval is above the gate
echo "rule:         regressed when the lower end of the ${level} is above" \
  "+$(get '{.spec.gate.maxRegressionPercent}')%; decided by: $(get '{.status.summary.gateDecidedBy}')"
echo "  steps:      $(get '{.status.summary.regressionPercent}')% (interval $(get '{.status.summary.regressionLowPercent}')% to $(get '{.status.summary.regressionHighPercent}')%)"
work=$(get '{.status.summary.addedWorkPercent}')
if [ -n "$work" ]; then
  echo "  added work: $work% (interval $(get '{.status.summary.addedWorkLowPercent}')% to $(get '{.status.summary.addedWorkHighPercent}')%)"
else
  echo "  added work: none"
fi
echo "top changes:  $(get '{range .status.summary.topChanges[*]}{.name} ({.change}) {.atEqualOpSpeedDeltaUsPerStep} us/step; {end}')"
if [ -n "$report" ]; then  # beside report.html: the pull request's summary and the gate as a JUnit test case
  echo "summary:      ${report%/*}/diff.md"
  echo "junit:        ${report%/*}/diff-junit.xml"
fi
if [ "$regressed" != False ]; then
  echo "gate: FAILED (Regressed=${regressed:-missing}): $(get '{.status.conditions[?(@.type=="Regressed")].message}')"
  exit 1
fi
echo "gate: passed"
