"""Trials, metrics, Experiment status and suggestions, as pure functions (no server)."""

from __future__ import annotations

import itertools
import json
import statistics
from typing import Any

import pytest
from katib_support import experiment

from kubetrain.local.katib.suggest import Suggester, SuggestionError
from kubetrain.runtime.katib import default_experiment
from kubetrain.runtime.katib.trials import (
    MetricLog,
    experiment_status,
    new_trial,
    next_trial_status,
    observation,
    parse_metric_lines,
    trial_state,
    trials_wanted,
)

NOW = "2026-01-01T00:00:00Z"


def made(name: str = "exp", **spec: Any) -> dict[str, Any]:
    body = default_experiment(experiment(name, **spec))
    body["metadata"]["uid"] = "u-exp"
    return body


def test_a_trial_and_its_trainjob_carry_the_assignment_as_text() -> None:
    trial, job = new_trial(made(), "exp-abcdefgh", [{"name": "lr", "value": "0.25"}], NOW)
    assert trial["metadata"]["labels"] == {"katib.kubeflow.org/experiment": "exp"}
    assert trial["metadata"]["ownerReferences"][0] | {} == {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "name": "exp",
        "uid": "u-exp",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert trial["spec"]["parameterAssignments"] == [{"name": "lr", "value": "0.25"}]
    assert [c["type"] for c in trial["status"]["conditions"]] == ["Created"]
    assert job["metadata"] == {"name": "exp-abcdefgh", "namespace": "default"}
    assert "float('0.25')" in job["spec"]["trainer"]["command"][2]
    assert job == trial["spec"]["runSpec"]


def test_meta_references_are_substituted() -> None:
    body = made()
    body["spec"]["trialTemplate"]["trialParameters"].append(
        {"name": "me", "reference": "${trialSpec.Name}"}
    )
    body["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["env"] = [
        {"name": "TRIAL", "value": "${trialParameters.me}"}
    ]
    _, job = new_trial(body, "exp-x", [{"name": "lr", "value": "1"}], NOW)
    assert job["spec"]["trainer"]["env"] == [{"name": "TRIAL", "value": "exp-x"}]


LINES = """\
epoch=0 loss=0.9 accuracy=0.5
2026-01-01T00:00:05Z loss=0.4
noise lossy=3 val-loss = 1e-2
loss=nan
epoch=2 loss=0.6 accuracy=0.7
"""


def test_stdout_lines_fold_into_min_max_latest() -> None:
    logs = parse_metric_lines(LINES, ["loss", "accuracy", "val-loss"])
    assert MetricLog("loss", "0.4", "2026-01-01T00:00:05Z") in logs
    folded = observation(
        logs,
        [
            {"name": "loss", "value": "min"},
            {"name": "accuracy", "value": "max"},
            {"name": "val-loss", "value": "min"},
            {"name": "f1", "value": "max"},
        ],
    )
    assert folded["metrics"] == [
        # The stamped line is the newest; unstamped lines are all "year 1".
        {"name": "loss", "min": "0.4", "max": "0.9", "latest": "0.4"},
        {"name": "accuracy", "min": "0.5", "max": "0.7", "latest": "0.7"},
        {"name": "val-loss", "min": "1e-2", "max": "1e-2", "latest": "1e-2"},
        {"name": "f1", "min": "unavailable", "max": "unavailable", "latest": "unavailable"},
    ]


def test_json_lines_carry_string_values() -> None:
    logs = parse_metric_lines(
        '{"loss": "0.5", "timestamp": "2026-01-01T00:00:01Z"}\nnot json\n',
        ["loss"],
        json_lines=True,
    )
    assert logs == [MetricLog("loss", "0.5", "2026-01-01T00:00:01Z")]


def job(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": f"{r} message"}
                for t, r in conditions
            ]
        }
    }


LOSS = {"metrics": [{"name": "loss", "min": "0.1", "max": "0.2", "latest": "0.2"}]}
NO_LOSS = {
    "metrics": [
        {"name": "loss", "min": "unavailable", "max": "unavailable", "latest": "unavailable"}
    ]
}

TRIAL_CASES = [
    ("a TrainJob without a verdict runs the trial", job(), None, "Running", None),
    (
        "a complete TrainJob with the objective succeeds",
        job(("Complete", "AllJobsCompleted")),
        LOSS,
        "Succeeded",
        "TrialSucceeded. Job reason: AllJobsCompleted",
    ),
    (
        "a complete TrainJob without the objective has no metrics",
        job(("Complete", "AllJobsCompleted")),
        NO_LOSS,
        "MetricsUnavailable",
        "MetricsUnavailable",
    ),
    (
        "a failed TrainJob fails the trial",
        job(("Failed", "FailedJobs")),
        NO_LOSS,
        "Failed",
        "TrialFailed. Job reason: FailedJobs",
    ),
    (
        "failure is checked before success",
        job(("Complete", "A"), ("Failed", "B")),
        LOSS,
        "Failed",
        "TrialFailed. Job reason: B",
    ),
]


@pytest.mark.parametrize(
    ("trainjob", "observed", "state", "reason"),
    [pytest.param(*c[1:], id=c[0]) for c in TRIAL_CASES],
)
def test_a_trial_follows_its_trainjob(
    trainjob: dict[str, Any], observed: Any, state: str, reason: str | None
) -> None:
    trial, _ = new_trial(made(), "exp-a", [{"name": "lr", "value": "1"}], NOW)
    running = {**trial, "status": next_trial_status(trial, job(), None, NOW)}
    status = next_trial_status(running, trainjob, observed, "2026-01-01T00:01:00Z")
    assert trial_state({"status": status}) == state
    if reason is not None:
        assert status["conditions"][-1]["reason"] == reason
        assert [c["type"] for c in status["conditions"]][:2] == ["Created", "Running"]
    if state != "Running":  # a completed trial never changes again
        finished = {**trial, "status": status}
        assert next_trial_status(finished, job(("Failed", "Later")), None, NOW) == status


def trial(name: str, state: str, loss: str | None = None) -> dict[str, Any]:
    conditions = [{"type": "Created", "status": "True"}]
    if state != "Pending":
        conditions.append({"type": state, "status": "True"})
    status: dict[str, Any] = {"conditions": conditions}
    if loss is not None:
        status["observation"] = {
            "metrics": [{"name": "loss", "min": loss, "max": loss, "latest": loss}]
        }
    return {
        "metadata": {"name": name},
        "spec": {"parameterAssignments": [{"name": "lr", "value": name}]},
        "status": status,
    }


def verdict(status: dict[str, Any]) -> tuple[str, str]:
    last = status["conditions"][-1]
    return last["type"], last["reason"]


EXPERIMENT_CASES = [
    (
        "trials still running",
        {},
        [trial("a", "Running"), trial("b", "Succeeded", "0.5")],
        ("Running", "ExperimentRunning"),
    ),
    (
        "max trials reached",
        {},
        [trial(n, "Succeeded", "0.5") for n in "abcd"],
        ("Succeeded", "ExperimentMaxTrialsReached"),
    ),
    (
        "a metrics-unavailable trial completes too",
        {},
        [*(trial(n, "Succeeded", "0.5") for n in "abc"), trial("d", "MetricsUnavailable")],
        ("Succeeded", "ExperimentMaxTrialsReached"),
    ),
    (
        "max failed reached",
        {"maxFailedTrialCount": 1},
        [trial("a", "Failed"), trial("b", "Running")],
        ("Failed", "ExperimentFailed"),
    ),
    (
        "zero failures allowed fails on the first",
        {"maxFailedTrialCount": 0},
        [trial("a", "Failed")],
        ("Failed", "ExperimentFailed"),
    ),
    (
        "goal reached",
        {"objective": {"objectiveMetricName": "loss", "type": "minimize", "goal": 0.2}},
        [trial("a", "Succeeded", "0.1"), trial("b", "Running")],
        ("Succeeded", "ExperimentGoalReached"),
    ),
]


@pytest.mark.parametrize(
    ("spec", "trials", "expected"), [pytest.param(*c[1:], id=c[0]) for c in EXPERIMENT_CASES]
)
def test_the_experiment_verdict_follows_katibs_order(
    spec: dict[str, Any], trials: list[dict[str, Any]], expected: tuple[str, str]
) -> None:
    status = experiment_status(made(**spec), trials, NOW)
    assert verdict(status) == expected
    if expected[0] != "Running":
        # Running=False comes just before the verdict, so the SDK reads the verdict.
        assert [(c["type"], c["status"]) for c in status["conditions"][-2:]] == [
            ("Running", "False"),
            (expected[0], "True"),
        ]


def test_the_optimal_trial_is_the_lowest_loss_and_counts_match() -> None:
    trials = [
        trial("a", "Succeeded", "0.5"),
        trial("b", "Succeeded", "0.1"),
        trial("c", "Failed"),
        trial("d", "Running"),
    ]
    status = experiment_status(made(), trials, NOW)
    assert status["currentOptimalTrial"]["bestTrialName"] == "b"
    assert status["currentOptimalTrial"]["parameterAssignments"] == [{"name": "lr", "value": "b"}]
    assert (
        status["trials"],
        status["trialsSucceeded"],
        status["trialsFailed"],
        status["trialsRunning"],
    ) == (4, 2, 1, 1)
    assert status["succeededTrialList"] == ["a", "b"]


def test_a_finished_experiment_keeps_its_verdict_and_starts_nothing() -> None:
    body = made()
    body["status"] = experiment_status(body, [trial(n, "Succeeded", "0.5") for n in "abcd"], NOW)
    again = experiment_status(body, [trial(n, "Failed") for n in "abcd"], "2027-01-01T00:00:00Z")
    assert verdict(again) == ("Succeeded", "ExperimentMaxTrialsReached")
    assert trials_wanted(body, []) == 0


@pytest.mark.parametrize(
    ("trials", "wanted"),
    [
        pytest.param([], 2, id="an empty experiment starts parallelTrialCount"),
        pytest.param([trial("a", "Running")], 1, id="one running leaves room for one"),
        pytest.param(
            [trial("a", "Succeeded", "1"), trial("b", "Succeeded", "1"), trial("c", "Running")],
            1,
            id="never past maxTrialCount",
        ),
        pytest.param(
            [trial(n, "Succeeded", "1") for n in "abc"] + [trial("d", "Pending")],
            0,
            id="all four made",
        ),
    ],
)
def test_trials_are_topped_up_to_parallel_within_the_maximum(
    trials: list[dict[str, Any]], wanted: int
) -> None:
    assert trials_wanted(made(), trials) == wanted


def finished(name: str, assignment: list[dict[str, str]], loss: float) -> dict[str, Any]:
    t = trial(name, "Succeeded", repr(loss))
    t["spec"]["parameterAssignments"] = assignment
    return t


def lr_of(assignment: list[dict[str, str]]) -> float:
    return float(assignment[0]["value"])


def test_a_seeded_random_search_repeats_itself() -> None:
    body = made()
    assert Suggester(body).suggest([], 3) == Suggester(body).suggest([], 3)
    assert all(0.0 <= lr_of(a) <= 1.0 for a in Suggester(body).suggest([], 5))


def test_grid_walks_every_combination_once_then_stops() -> None:
    body = made(
        algorithm={"algorithmName": "grid"},
        maxTrialCount=6,
        parameters=[
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.01", "max": "0.03", "step": "0.01"},
            },
            {"name": "bs", "parameterType": "categorical", "feasibleSpace": {"list": ["32", "64"]}},
        ],
    )
    suggester = Suggester(body)
    points = suggester.suggest([], 4) + suggester.suggest([], 4)
    assert len(points) == 6
    assert len({json.dumps(p) for p in points}) == 6
    # Katib's np.arange values, as text.
    assert {p[0]["value"] for p in points} == {"0.01", "0.02", "0.03"}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        pytest.param(
            {"algorithm": {"algorithmName": "grid"}},
            "Param lr step is nil; For discrete search space, all parameters must include step",
            id="grid needs a step on doubles",
        ),
        pytest.param(
            {
                "algorithm": {"algorithmName": "grid"},
                "parameters": [
                    {
                        "name": "lr",
                        "parameterType": "int",
                        "feasibleSpace": {"min": "1", "max": "2"},
                    }
                ],
            },
            "Max Trial Count: 4 > all possible search space combinations: 2",
            id="grid cannot make more trials than points",
        ),
        pytest.param(
            {"algorithm": {"algorithmName": "cmaes"}},
            "CMA-ES only supports two or more dimensional continuous search space",
            id="cmaes needs two continuous parameters",
        ),
    ],
)
def test_an_algorithm_that_cannot_serve_the_space_says_why(
    spec: dict[str, Any], words: str
) -> None:
    with pytest.raises(SuggestionError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Suggester(made(**spec)).suggest([], 1)


def search(algorithm: str, seed: int, rounds: int = 15) -> float:
    """Best loss of a search on a bowl around (0.3, 0.7, 0.5), two trials at a time."""
    body = made(
        algorithm={
            "algorithmName": algorithm,
            "algorithmSettings": [{"name": "random_state", "value": str(seed)}],
        },
        maxTrialCount=rounds * 2,
        parameters=[
            {"name": n, "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
            for n in "abc"
        ],
    )
    suggester = Suggester(body)
    done: list[dict[str, Any]] = []
    names = (f"t{i}" for i in itertools.count())
    for _ in range(rounds):
        for assignment in suggester.suggest(done, 2):
            name = next(names)
            suggester.bind(name)
            v = {a["name"]: float(a["value"]) for a in assignment}
            done.append(
                finished(
                    name,
                    assignment,
                    (v["a"] - 0.3) ** 2 + (v["b"] - 0.7) ** 2 + (v["c"] - 0.5) ** 2,
                )
            )
    return min(float(t["status"]["observation"]["metrics"][0]["latest"]) for t in done)


@pytest.mark.parametrize("algorithm", ["tpe", "multivariate-tpe"])
def test_model_based_search_beats_random_on_a_known_function(algorithm: str) -> None:
    # Medians over five seeds: one seed of random search can be lucky.
    assert statistics.median(search(algorithm, s) for s in range(5)) < statistics.median(
        search("random", s) for s in range(5)
    )


@pytest.mark.parametrize("algorithm", ["cmaes", "bayesianoptimization"])
def test_other_optuna_samplers_serve_katibs_names(algorithm: str) -> None:
    points = Suggester(
        made(
            algorithm={"algorithmName": algorithm},
            parameters=[
                {"name": n, "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}}
                for n in "ab"
            ],
        )
    ).suggest([], 2)
    assert len(points) == 2 and all(0 <= float(a["value"]) <= 1 for p in points for a in p)


def test_a_restarted_suggester_learns_from_trials_it_never_asked_for() -> None:
    body = made(
        algorithm={
            "algorithmName": "tpe",
            "algorithmSettings": [{"name": "n_startup_trials", "value": "2"}],
        }
    )
    history = [
        finished(f"old{i}", [{"name": "lr", "value": str(v)}], (v - 0.3) ** 2)
        for i, v in enumerate((0.1, 0.3, 0.9))
    ]
    suggester = Suggester(body)
    suggester.suggest(history, 1)
    assert len(suggester._study.trials) == 4  # three told, one asked


def test_medianstop_rule_is_the_mean_of_first_averages_once_enough_trials_succeeded() -> None:
    from kubetrain.runtime.katib.earlystop import median_stop_rule, should_stop

    body = made(
        earlyStopping={
            "algorithmName": "medianstop",
            "algorithmSettings": [
                {"name": "min_trials_required", "value": "2"},
                {"name": "start_step", "value": "2"},
            ],
        }
    )
    assert median_stop_rule(body, [[1.0, 3.0, 0.0]]) == []
    (rule,) = median_stop_rule(body, [[1.0, 3.0, 0.0], [2.0, 2.0]])
    assert rule == {"name": "loss", "value": "2.0", "comparison": "greater", "startStep": 2}
    assert not should_stop([rule], [5.0], maximize=False)  # not at the start step yet
    assert should_stop([rule], [5.0, 2.5, 0.1], maximize=False)  # best of the first two > 2.0
    assert not should_stop([rule], [5.0, 1.5], maximize=False)


@pytest.mark.parametrize(
    ("policy", "restarted"),
    [
        pytest.param("LongRunning", True, id="LongRunning restarts when maxTrialCount is raised"),
        pytest.param("Never", False, id="Never stays finished"),
    ],
)
def test_raising_max_trial_count_restarts_only_a_resumable_experiment(
    policy: str, restarted: bool
) -> None:
    body = made(resumePolicy=policy)
    body["status"] = experiment_status(body, [trial(n, "Succeeded", "0.5") for n in "abcd"], NOW)
    body["spec"]["maxTrialCount"] = 6
    again = experiment_status(body, [trial(n, "Succeeded", "0.5") for n in "abcd"], NOW)
    assert verdict(again) == (
        ("Running", "ExperimentRunning")
        if restarted
        else ("Succeeded", "ExperimentMaxTrialsReached")
    )
    assert trials_wanted(
        {**body, "status": again}, [trial(n, "Succeeded", "0.5") for n in "abcd"]
    ) == (2 if restarted else 0)
