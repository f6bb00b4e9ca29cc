# syntax=docker/dockerfile:1
# stepscope sidecar image: the sidecar agent and the init container that copies the in-process hook; no torch, no kopf.
# It carries the analyzer's packages (numpy, orjson, msgspec, isal: the [analyzer] extra) so that each rank's trace is
# summarised where it was recorded (python -m stepscope_analyzer.ranks.node_summaries, run by the sidecar as a command).
# Built from the repository root with the one pyproject: docker build -f images/sidecar.Dockerfile -t stepscope/sidecar:dev .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/constraints.txt requirements/constraints.txt
COPY contract contract
COPY storage storage
COPY cli cli
COPY operator operator
COPY sidecar sidecar
COPY analyzer_job analyzer_job
COPY localcluster localcluster
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/stepscope \
 && /opt/stepscope/bin/pip install -c requirements/constraints.txt "$(ls /wheels/stepscope-*.whl)[sidecar,analyzer]" \
 && find /opt/stepscope -name '__pycache__' -prune -exec rm -rf {} + \
 && rm -rf /opt/stepscope/lib/python3.11/site-packages/pip /opt/stepscope/bin/pip*

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="stepscope-sidecar" \
      org.opencontainers.image.description="stepscope sidecar" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/stepscope/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/stepscope /opt/stepscope
# Non-root, matching the chart's securityContext (runAsUser 65532); the root filesystem may be read-only.
USER 65532:65532
CMD ["stepscope", "--help"]
