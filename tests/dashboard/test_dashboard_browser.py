"""``kubetrain dashboard`` in a real browser (Debian's Chromium via Playwright) on the local engine.

One engine, two dashboard processes (read-only and ``--allow-actions``) and one browser serve the
whole module. A two-node job reports its steps through kubetrain's progress client while the page
is watched: it must appear within 2 s of ``kubetrain apply``, its progress bar and loss curve must
move, rank 1's log must stream, and it must end Complete. Screenshots of every page at 1280x800 go
to ``artifacts/dashboard/`` (or ``$KUBETRAIN_ARTIFACTS``), for people to look at; they are not
committed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dashboard_support import DEAD_KUBECONFIG, Dashboard, kubetrain, start_dashboard, stop

from daemons import module_daemon
from kubetrain.testing import make_runtime

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("KUBETRAIN_ARTIFACTS") or REPO / "artifacts") / "dashboard"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

TRAINED_WITHIN_MS = 120_000  # two pods start, then about 5 s of steps

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(360),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"{CHROMIUM} missing (apt-get install chromium)"
    ),
]

# A job that idles, on a namespaced runtime without ports (so it never waits for 29500).
SLEEPER = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: shell, labels: {trainer.kubeflow.org/framework: shell}}
spec:
  mlPolicy: {numNodes: 1}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers:
                - {name: node, image: python, command: [bash, -c, "echo idle; sleep 300"]}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: sleeper, labels: {team: infra}}
spec:
  runtimeRef: {name: shell, kind: TrainingRuntime}
"""


def done(home: Path, *argv: str) -> str:
    proc = kubetrain(home, *argv)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_daemon(tmp_path_factory)


@pytest.fixture(scope="module")
def dashboards(home: Path) -> Iterator[dict[str, Dashboard]]:
    started: dict[str, Dashboard] = {}
    try:
        started["actions"] = start_dashboard(home, "--allow-actions")
        started["read-only"] = start_dashboard(home)
        yield started
    finally:
        for dash in started.values():
            stop(dash)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, errors  # a script error is a bug even when the test's checks pass


def shot(page: Any, name: str, *, full: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full)


# The job the page follows: two nodes on a namespaced runtime without ports (so it never waits
# for torch's 29500). Each node says it started (rank 1's log is watched), then waits for the go
# file the test writes once the page records every update; rank 0 then reports 10 steps through
# kubetrain's progress client, 0.5 s apart, with a falling loss, and both end.
TRAINER = """\
import os, pathlib, time
from kubetrain import progress
index = os.environ["INDEX"]
print(f"node {index} started, waiting for the page", flush=True)
while not pathlib.Path("/ctl/go").exists():
    time.sleep(0.1)
for step in range(1, 11):
    time.sleep(0.5)
    if index == "0":
        progress.report(step=step, total_steps=10, metrics={"loss": round(2.0 / step, 4)})
progress.flush()
print(f"node {index} done", flush=True)
"""


CLAIM = "stepper-ctl"


def _watched_job(tmp: Path) -> Path:
    """The job and its runtime. The test talks to the pods through a PVC (a directory under the
    engine's home locally; the sandbox's /tmp is private); KUBETRAIN_PROGRESS_INTERVAL lets every
    step through."""
    runtime = (
        make_runtime("shell-steps", kind="TrainingRuntime")
        .framework("shell")
        .num_nodes(1)
        .job("node", ancestor="trainer", image="python",
             command=["python", "-c", TRAINER],
             volume_mounts=[{"name": "ctl", "mountPath": "/ctl"}],
             volumes=[{"name": "ctl", "persistentVolumeClaim": {"claimName": CLAIM}}])
        .obj()
    )  # fmt: skip
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "stepper"},
        "spec": {
            "runtimeRef": {"name": "shell-steps", "kind": "TrainingRuntime"},
            "trainer": {
                "numNodes": 2,
                "env": [
                    {"name": "INDEX", "valueFrom": {"fieldRef": {"fieldPath": index}}},
                    {"name": "KUBETRAIN_PROGRESS_INTERVAL", "value": "0.25"},
                ],
            },
        },
    }
    path = tmp / "stepper.yaml"
    path.write_text(yaml.safe_dump_all([runtime, trainjob]))
    return path


# Installed in the job page: every progress value and chart size the page ever showed, so the
# check sees each update the page made, however fast training runs.
RECORDER = """() => {
  window.__seen = {progress: [], points: []};
  const note = () => {
    const bar = document.querySelector(".summary [role=progressbar]");
    if (bar) window.__seen.progress.push(Number(bar.getAttribute("aria-valuenow")));
    const charts = document.getElementById("charts");
    if (charts && charts.dataset.points) window.__seen.points.push(Number(charts.dataset.points));
  };
  new MutationObserver(note).observe(document.getElementById("main"),
    {subtree: true, childList: true, attributes: true});
  note();
}"""
MIDWAY_OR_DONE = """() => {
  const p = window.__seen.progress, done = document.querySelector("h1 .s-Complete, h1 .s-Failed");
  return done || (p.some((v) => v > 0 && v < 100) && document.querySelector("[data-metric=loss] canvas"));
}"""


def test_a_job_is_watched_from_apply_to_complete(
    home: Path, dashboards: dict[str, Dashboard], page: Any, tmp_path: Path
) -> None:
    dash = dashboards["actions"]
    page.goto(dash.url)
    page.wait_for_selector("text=No TrainJobs yet")
    done(home, "apply", "-f", str(_watched_job(tmp_path)))
    applied = time.monotonic()
    row = page.wait_for_selector('tr[data-key="default/stepper"]', timeout=2000)
    assert time.monotonic() - applied < 2.0
    assert "shell-steps" in row.inner_text()  # its runtime

    page.click('tr[data-key="default/stepper"] >> text=stepper')
    page.wait_for_selector("h1 >> text=stepper")
    page.evaluate(RECORDER)
    go = home / "volumes" / "default" / CLAIM / "go"
    go.parent.mkdir(parents=True, exist_ok=True)
    go.touch()  # steps start only now: the recorder sees each one
    # A screenshot mid-training (not a check).
    page.wait_for_function(MIDWAY_OR_DONE, timeout=TRAINED_WITHIN_MS)
    shot(page, "trainjob-training", full=True)
    page.wait_for_selector("h1 .badge.s-Complete, h1 .badge.s-Failed", timeout=TRAINED_WITHIN_MS)
    assert page.inner_text("h1 .badge") == "Complete", page.inner_text("main")
    seen = page.evaluate("window.__seen")
    # It moved while running: several percentages between 0 and 100 and a loss curve that
    # grew point by point, then 100 %.
    assert len({p for p in seen["progress"] if 0 < p < 100}) >= 2, seen
    assert max(seen["progress"]) == 100
    assert len(set(seen["points"])) >= 3, seen
    page.wait_for_selector('[data-metric="loss"] canvas')
    shot(page, "trainjob", full=True)

    page.click("#tab-logs")
    page.select_option("#log-step", "node-1")
    page.wait_for_selector("#log >> text=node 1 started")  # rank 1's own line
    page.fill("#log-search", "node 1 started")
    assert page.locator("#log mark").count() >= 1
    shot(page, "trainjob-logs")
    page.click("#tab-events")
    page.wait_for_selector("table[aria-label=Events]")
    shot(page, "trainjob-events")
    page.click("#tab-yaml")
    assert "kind: TrainJob" in page.inner_text("pre.code")
    page.select_option("#yaml-of", "rendered")
    assert "kind: JobSet" in page.inner_text("pre.code")
    shot(page, "trainjob-yaml")

    page.goto(dash.base + "/#/")
    page.wait_for_selector('tr[data-key="default/stepper"] >> text=Complete')
    shot(page, "trainjobs")
    page.click("#nav >> text=Runtimes")
    page.wait_for_selector("section.runtime >> text=torch-distributed")
    shot(page, "runtimes")


def test_suspend_needs_allow_actions_and_is_confirmed(
    home: Path, dashboards: dict[str, Dashboard], page: Any, tmp_path: Path
) -> None:
    (tmp_path / "sleeper.yaml").write_text(SLEEPER)
    done(home, "apply", "-f", str(tmp_path / "sleeper.yaml"))
    read_only = dashboards["read-only"]
    page.goto(read_only.url + "#/jobs/default/sleeper")
    page.wait_for_selector("h1 >> text=sleeper")
    assert page.locator("h1 button").count() == 0  # read-only: no action offered

    page.goto(dashboards["actions"].url + "#/jobs/default/sleeper")
    page.wait_for_selector("h1 >> text=Running", timeout=60000)
    page.click("h1 >> text=Suspend")
    page.wait_for_selector("dialog[open] >> text=Suspend TrainJob sleeper?")
    page.click("dialog >> text=Cancel")  # not confirmed: nothing happens
    assert "Running" in page.inner_text("h1 .badge")
    page.click("h1 >> text=Suspend")
    page.click("#confirm-ok")
    page.wait_for_selector("h1 >> text=Suspended", timeout=20000)
    assert json.loads(done(home, "get", "trainjob", "sleeper", "-o", "json"))["spec"]["suspend"]
    page.wait_for_selector("h1 >> text=Resume")


PHONE_JOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: phone-view}
spec:
  suspend: true
  runtimeRef: {name: torch-distributed}
"""


def test_bad_input_gets_a_clear_message_in_the_page(
    home: Path, dashboards: dict[str, Dashboard], page: Any, tmp_path: Path
) -> None:
    # A row of its own (suspended: nothing runs), whichever tests ran before on this daemon.
    (tmp_path / "phone.yaml").write_text(PHONE_JOB)
    done(home, "apply", "-f", str(tmp_path / "phone.yaml"))
    dash = dashboards["read-only"]
    page.goto(dash.base + "/?token=from-an-earlier-run")
    assert "Token required" in page.inner_text("main")
    page.goto(dash.url + "#/jobs/default/no-such-job")
    page.wait_for_selector('.panel[role=alert] >> text=There is no TrainJob "no-such-job"')
    shot(page, "unknown-trainjob")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(dash.base + "/#/")
    page.wait_for_selector('tr[data-key="default/phone-view"]')
    shot(page, "trainjobs-phone")
    page.click('tr[data-key="default/phone-view"] td.name a')
    page.wait_for_selector("h1 .badge")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing off-screen
    shot(page, "trainjob-phone", full=True)


def test_an_unreachable_api_server_is_said_in_the_page(tmp_path: Path, page: Any) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(DEAD_KUBECONFIG)
    dash = start_dashboard(tmp_path, "--kubeconfig", str(kubeconfig))
    try:
        page.goto(dash.url)
        page.wait_for_selector("#banner >> text=Cannot read from the Kubernetes API")
        assert "https://127.0.0.1:9" in page.inner_text("#banner")
        shot(page, "api-server-down")
        page.goto(dash.base + "/#/experiments")
        page.wait_for_selector("#banner >> text=Cannot read Experiments")
        assert "https://127.0.0.1:9" in page.inner_text("#banner")
    finally:
        stop(dash)


# A small random search on a port-free runtime: three one-line trials, all at once, kept after
# they end (retain) so the page links to their TrainJobs.
EXPERIMENT = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: python-nodes, labels: {trainer.kubeflow.org/framework: plainml}}
spec:
  mlPolicy: {numNodes: 1}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            backoffLimit: 0
            template:
              spec:
                containers: [{name: node, image: python:3.11}]
---
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: lr-search}
spec:
  algorithm:
    algorithmName: random
    algorithmSettings: [{name: random_state, value: "1"}]
  maxTrialCount: 3
  parallelTrialCount: 3
  objective: {objectiveMetricName: loss, type: minimize, additionalMetricNames: [acc]}
  parameters:
  - name: lr
    parameterType: double
    feasibleSpace: {min: "0.0", max: "1.0"}
  trialTemplate:
    primaryContainerName: node
    retain: true
    trialParameters: [{name: lr, reference: lr}]
    trialSpec:
      apiVersion: trainer.kubeflow.org/v1alpha1
      kind: TrainJob
      spec:
        runtimeRef: {name: python-nodes, kind: TrainingRuntime}
        trainer:
          numNodes: 1
          command:
          - python
          - -c
          - "lr = float('${trialParameters.lr}'); print(f'loss={(lr - 0.3) ** 2}'); print(f'acc={1 - lr}')"
"""


# The elements that reach past the window's right edge, outside the boxes that scroll sideways
# (for the message when one does).
OFF_SCREEN = """() => [...document.querySelectorAll("body *")]
  .filter((el) => !el.closest(".tablewrap, pre") && el.getBoundingClientRect().right > window.innerWidth + 0.5)
  .map((el) => `${el.tagName}.${el.className} ${Math.round(el.getBoundingClientRect().right)}`)
  .slice(0, 8)"""


def test_an_experiment_is_listed_live_and_its_page_shows_trials_chart_and_best(
    home: Path, dashboards: dict[str, Dashboard], page: Any, tmp_path: Path
) -> None:
    dash = dashboards["read-only"]
    page.goto(dash.url + "#/experiments")
    page.wait_for_selector("text=No Experiments yet")
    (tmp_path / "experiment.yaml").write_text(EXPERIMENT)
    done(home, "apply", "-f", str(tmp_path / "experiment.yaml"))
    # The list follows the watch: the row appears, then reaches Complete, without a reload.
    row = page.wait_for_selector('tr[data-key="default/lr-search"]', timeout=10000)
    assert "random" in row.inner_text() and "minimize loss" in row.inner_text()
    page.wait_for_selector('tr[data-key="default/lr-search"] >> text=Complete', timeout=60000)
    cells = page.inner_text('tr[data-key="default/lr-search"]')
    assert "3/3" in cells and "loss=" in cells, cells
    shot(page, "experiments")

    page.click("text=lr-search")
    page.wait_for_selector("h1 >> text=lr-search")
    page.wait_for_selector("table[aria-label=Trials] tbody tr:nth-child(3)")
    trials = page.locator("table[aria-label=Trials] tbody tr")
    assert trials.count() == 3
    # Every trial succeeded, shows its lr, its loss and acc, and links to its TrainJob.
    for i in range(3):
        text = trials.nth(i).inner_text()
        assert "Succeeded" in text and "0." in text, text
    links = page.locator("table[aria-label=Trials] td.name a")
    assert links.count() == 3
    assert links.first.get_attribute("href").startswith("#/jobs/default/lr-search-")
    # The best trial (currentOptimalTrial) is marked, and its loss is the lowest.
    best = page.locator("table[aria-label=Trials] tr.best")
    assert best.count() == 1 and "best" in best.inner_text()
    losses = page.evaluate(
        """() => [...document.querySelectorAll("table[aria-label=Trials] tbody tr")].map((tr) =>
             [tr.classList.contains("best"), Number(tr.children[4].textContent)])"""
    )
    assert min(v for _, v in losses) == next(v for b, v in losses if b), losses
    page.wait_for_selector("#objective-chart canvas")
    assert page.get_attribute("#objective-chart", "data-points") == "3"
    shot(page, "experiment", full=True)

    # A trial's TrainJob page is one click away.
    links.first.click()
    page.wait_for_selector("h1 .badge.s-Complete", timeout=20000)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(dash.base + "/#/experiments/default/lr-search")
    page.wait_for_selector("#objective-chart canvas")
    wide = page.evaluate(OFF_SCREEN)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, wide  # nothing off-screen
    shot(page, "experiment-phone", full=True)
    page.goto(dash.base + "/#/experiments/default/no-such-search")
    page.wait_for_selector(
        '.panel[role=alert] >> text=There is no Experiment "no-such-search" in namespace "default"'
    )
