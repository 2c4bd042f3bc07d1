"""Run inside a pod of the local engine by tests/security: tries every attack of issue 13's
findings 1 and 2 and prints one JSON line, attack -> what happened.

Inputs (env): ENGINE_HOME (the engine's KUBETRAIN_HOME on the host), SECRET_FILES (host paths
of the engine's secret files, ":"-separated), API_URL (the embedded API server), VICTIM (a
running TrainJob of the same namespace), OLD_TOKEN (a token of a deleted pod of a job with
the victim's name). The pod's own token and CA come from the TrainJobStatus env.
"""

import glob
import json
import os
import socket
import ssl
import urllib.error
import urllib.request

out = {}


def read(path):
    try:
        with open(path, "rb") as f:
            return f"READ {len(f.read())} bytes"
    except OSError as err:
        return "refused: " + type(err).__name__


def post(url, token, body, context=None):
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError as err:
        return "unreachable: " + type(err).__name__


home = os.environ["ENGINE_HOME"]
for path in os.environ["SECRET_FILES"].split(":"):
    out["read " + os.path.relpath(path, home)] = read(path)
# Another job's projected token, wherever the engine keeps pod directories.
others = glob.glob(home + "/pods/*/volumes/*/token")
out["find other pods' tokens"] = others
out["list the engine home"] = sorted(os.listdir(home)) if os.path.isdir(home) else "absent"
out["list /root"] = sorted(os.listdir("/root"))

with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
    own_token = f.read().strip()
own_url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
ca = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
mine = os.environ["TRAINJOB_NAME"]
victim_url = own_url.replace(f"/trainjobs/{mine}/", f"/trainjobs/{os.environ['VICTIM']}/")
stamp = "2026-01-01T00:00:00Z"
forged = {
    "trainerStatus": {
        "progressPercentage": 99,
        "lastUpdatedTime": stamp,
        "metrics": [{"name": "loss", "value": "FORGED"}],
    }
}
honest = {"trainerStatus": {"progressPercentage": 1, "lastUpdatedTime": stamp}}
out["report own progress (control)"] = post(own_url, own_token, honest, ca)
out["forge the victim's progress with own token"] = post(victim_url, own_token, forged, ca)
out["forge the victim's progress with a deleted pod's token"] = post(
    victim_url, os.environ["OLD_TOKEN"], forged, ca
)
# The admin API without the admin token: with the pod's own token, and with none.
api = os.environ["API_URL"]
try:  # on the pod network the API server is kubernetes.default.svc, as in a cluster
    socket.gethostbyname("kubernetes.default.svc")
    api = api.replace("127.0.0.1", "kubernetes.default.svc")
except OSError:  # pods share the host's network: the loopback address is the server's
    pass
insecure = ssl._create_unverified_context()
hostpath_job = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "escape"},
    "spec": {"runtimeRef": {"name": "plain", "kind": "TrainingRuntime"}},
}
out["create a TrainJob with the pod's token"] = post(
    api + "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs",
    own_token,
    hostpath_job,
    insecure,
)
print("PROBE " + json.dumps(out, sort_keys=True), flush=True)
