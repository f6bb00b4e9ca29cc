"""Names shared by every component: API identity, labels, annotations, ports, headers."""

from typing import Final

GROUP: Final = "stepscope.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "ProfileSession"
PLURAL: Final = "profilesessions"
SINGULAR: Final = "profilesession"
SHORT_NAME: Final = "profs"
CATEGORY: Final = "stepscope"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

# Pod metadata the operator and the injection webhook read.
INJECT_LABEL: Final = "stepscope.dev/inject"  # "true" on a pod or namespace: inject the sidecar
RANK_ANNOTATION: Final = "stepscope.dev/rank"  # explicit rank of a pod
SIDECAR_PORT_ANNOTATION: Final = "stepscope.dev/sidecar-port"
INJECTED_ANNOTATION: Final = "stepscope.dev/injected"  # set by the webhook, makes injection idempotent
SESSION_LABEL: Final = "stepscope.dev/session"  # on objects the operator creates for a session
FINALIZER: Final = "stepscope.dev/finalizer"

DEFAULT_SIDECAR_PORT: Final = 8471
SIDECAR_CONTAINER_NAME: Final = "stepscope-sidecar"

# The sidecar control API.
AUTH_HEADER: Final = "Authorization"
AUTH_SCHEME: Final = "Bearer"
SIDECAR_API_PREFIX: Final = "/v1"

# Environment shared by the sidecar and the in-process hook.
ENV_HOOK_DIR: Final = "STEPSCOPE_HOOK_DIR"  # shared volume where request/state/trace files live
ENV_TOKEN_FILE: Final = "STEPSCOPE_TOKEN_FILE"  # noqa: S105 - mounted Secret file with the sidecar bearer token
ENV_POD_NAME: Final = "STEPSCOPE_POD_NAME"
ENV_POD_NAMESPACE: Final = "STEPSCOPE_POD_NAMESPACE"
ENV_NODE_NAME: Final = "STEPSCOPE_NODE_NAME"

# Where an injected sidecar may upload (docs/security.md): the storage base sessions of its namespace must use, and
# the S3-compatible endpoint (empty: the provider's default). Comma-separated for several.
ENV_STORAGE_BASE: Final = "STEPSCOPE_STORAGE_BASE"
ENV_STORAGE_ENDPOINT: Final = "STEPSCOPE_STORAGE_ENDPOINT"

# The spec the operator accepted when the session started, frozen as JSON (the install's storage settings filled in):
# the session's storage folder and the credentials that may delete it are recomputed from it (never from status,
# which the analyzer may write); the analyzer reads its storage from it too.
ACCEPTED_SPEC_ANNOTATION: Final = "stepscope.dev/accepted-spec"

# The ProfileTrigger custom resource (same group and version): creates ProfileSessions from step telemetry.
TRIGGER_KIND: Final = "ProfileTrigger"
TRIGGER_PLURAL: Final = "profiletriggers"
TRIGGER_SINGULAR: Final = "profiletrigger"
TRIGGER_SHORT_NAME: Final = "proftrig"
TRIGGER_CRD_NAME: Final = f"{TRIGGER_PLURAL}.{GROUP}"
TRIGGER_LABEL: Final = "stepscope.dev/trigger"  # on the sessions a trigger creates: the trigger's name
TRIGGER_CONDITION_ANNOTATION: Final = "stepscope.dev/trigger-condition"  # on those sessions: what fired
TRIGGER_REASON_ANNOTATION: Final = "stepscope.dev/trigger-reason"  # on those sessions: why
ENV_JOB_NAME: Final = "STEPSCOPE_JOB_NAME"  # the sidecar's job, as a label of its step metrics

# Onboarding a training namespace (the operator writes, `stepscope check` looks for): the namespace label, and the
# default names of the sidecar token Secret and the analyzer's ServiceAccount written there.
ONBOARDING_LABEL = "stepscope.dev/profiling"
ONBOARDING_LABEL_VALUE = "enabled"
DEFAULT_TOKEN_SECRET = "stepscope-sidecar-token"  # noqa: S105 - a Secret's name
DEFAULT_ANALYZER_ACCOUNT = "stepscope-analyzer"

# the files `stepscope diff` writes (their shapes: diff.py)
DIFF_JSON: Final = "diff.json"
DIFF_HTML: Final = "diff.html"
DIFF_MD: Final = "diff.md"
"""the pull-request summary: verdict, the numbers decided on, the first five changes, links"""
DIFF_JUNIT: Final = "diff-junit.xml"
"""the verdict as one JUnit test case, for a CI system's test results"""
