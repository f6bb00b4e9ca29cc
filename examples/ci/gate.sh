#!/bin/sh
# The regression gate of a CI pipeline (docs/ci.md): apply a ProfileSession that names a baseline, wait until it has
# finished (whatever the outcome: condition Finished), print its numbers and exit
#   0  the steps are not slower than the baseline by more than spec.gate.maxRegressionPercent (Regressed=False)
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
regressed=$(get '{.status.conditions[?(@.type=="Regressed")].status}')
echo "phase:        $phase: $(get '{.status.message}')"
echo "step:         median $(get '{.status.summary.medianStepMs}') ms, p90 $(get '{.status.summary.p90StepMs}') ms"
# the numbers the gate decided on: Regressed=True when the lower end of either interval is above the gate
echo "gate:         at most $(get '{.spec.gate.maxRegressionPercent}')% slower; decided by: $(get '{.status.summary.gateDecidedBy}')"
echo "  steps:      $(get '{.status.summary.regressionPercent}')% (interval $(get '{.status.summary.regressionLowPercent}')% to $(get '{.status.summary.regressionHighPercent}')%)"
work=$(get '{.status.summary.addedWorkPercent}')
if [ -n "$work" ]; then
  echo "  added work: $work% (interval $(get '{.status.summary.addedWorkLowPercent}')% to $(get '{.status.summary.addedWorkHighPercent}')%)"
else
  echo "  added work: none"
fi
echo "top changes:  $(get '{range .status.summary.topChanges[*]}{.name} ({.change}) {.deltaUsPerStep} us/step; {end}')"
report=$(get '{.status.reportURL}')
echo "report:       $report"
if [ -n "$report" ]; then  # beside report.html: the pull request's summary and the gate as a JUnit test case
  echo "summary:      ${report%/*}/diff.md"
  echo "junit:        ${report%/*}/diff-junit.xml"
fi
if [ "$phase" = Failed ]; then
  echo "gate: the session failed"
  exit 2
fi
if [ "$regressed" != False ]; then
  echo "gate: FAILED (Regressed=${regressed:-missing}): $(get '{.status.conditions[?(@.type=="Regressed")].message}')"
  exit 1
fi
echo "gate: passed"
