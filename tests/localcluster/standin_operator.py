"""A stand-in for the operator in test_demo_flow.py: it drives the demo session's status the way the operator would
(phases, captured/total, summary, report URL) so the demo's own steps can be tested before the real one lands."""

from __future__ import annotations

import base64
import os
import time

import boto3
from kubernetes import client, config

API = ("stepscope.dev", "v1alpha1", "default", "profilesessions")


def main() -> None:
    api_client = config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    custom = client.CustomObjectsApi(api_client)
    while True:
        try:
            custom.get_namespaced_custom_object(*API, "demo")
            break
        except client.ApiException:
            time.sleep(0.2)
    secret = client.CoreV1Api(api_client).read_namespaced_secret("stepscope-s3", "default")
    creds = {k: base64.b64decode(v).decode() for k, v in secret.data.items()}
    s3 = boto3.client(
        "s3",
        endpoint_url=os.environ["STEPSCOPE_STORAGE_ENDPOINT"],  # the install's storage settings
        region_name="us-east-1",
        aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
    )
    s3.put_object(Bucket="stepscope-demo", Key="standin/report.html", Body=b"<html>stand-in</html>")
    s3.put_object(Bucket="stepscope-demo", Key="standin/report.json", Body=b"{}")
    for status in (
        {"phase": "Capturing", "progress": "0/4"},
        {"phase": "Capturing", "progress": "4/4"},
        {"phase": "Analyzing", "progress": "4/4"},
        {
            "phase": "Succeeded",
            "progress": "4/4",
            "message": "Rank 2 (stand-in)",  # the verdict, told once: the summary leaves it out
            "summary": {"slowestRank": 2},
            "reportURL": "s3://stepscope-demo/standin/report.html",
            "reportJSONURL": "s3://stepscope-demo/standin/report.json",
        },
    ):
        custom.patch_namespaced_custom_object_status(*API, "demo", {"status": status})
        time.sleep(0.3)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
