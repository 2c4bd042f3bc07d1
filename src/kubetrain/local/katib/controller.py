"""The Experiment controller of the local engine: Katib's Experiment, Suggestion and Trial
controllers folded into one level-triggered loop.

Each reconcile of an Experiment reads it, its Trials, their TrainJobs and its Suggestion from
informer caches; moves every Trial on from its TrainJob (collecting metrics when the TrainJob
completes); derives the Experiment's status; and, while the Experiment runs, asks the
``Suggester`` for new assignments and starts each as a Trial with its TrainJob. The decisions
are ``kubetrain.runtime.katib``'s pure functions; this module only reads and writes.

The TrainJob is created just before its Trial (owned by the Experiment for that moment, then
by the Trial), so whoever lists Trials always finds each one's TrainJob: the official SDK
raises on a Trial without one. A TrainJob left without its Trial by a crash in between is
deleted on the next reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.access import dicts, list_at, obj_at
from kubetrain.api.types import Obj
from kubetrain.controller.events import EventRecorder
from kubetrain.kube.client import ApiError, KubeClient
from kubetrain.kube.informer import Informer, object_key
from kubetrain.kube.kinds import EXPERIMENT, POD, SUGGESTION, TRAINJOB, TRIAL, Kind
from kubetrain.kube.loop import failure_logger, run_loop
from kubetrain.kube.workqueue import WorkQueue
from kubetrain.runtime.katib.admission import METRICS_FILE_MARKER
from kubetrain.runtime.katib.earlystop import median_stop_rule, should_stop
from kubetrain.runtime.katib.experiment import EXPERIMENT_LABEL, KATIB_API_VERSION
from kubetrain.runtime.katib.trials import (
    MetricLog,
    condition,
    experiment_status,
    is_completed,
    is_finished,
    job_outcome,
    new_trial,
    next_trial_status,
    observation,
    parse_metric_lines,
    set_condition,
    trainjob_for,
    trial_name,
    trial_state,
    trials_wanted,
)

from .suggest import Suggester, SuggestionError

__all__ = ["EXPERIMENT", "SUGGESTION", "TRIAL", "ExperimentController"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, experiment name)


def _now(clock: Callable[[], datetime]) -> str:
    return clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner_experiment(obj: Obj) -> str | None:
    for ref in dicts(obj_at(obj, "metadata").get("ownerReferences")):
        if ref.get("apiVersion") == KATIB_API_VERSION and ref.get("kind") in (
            "Trial",
            "Experiment",
        ):
            return str(ref.get("name"))
    return None


def _trial_job(obj: Obj) -> bool:
    return _owner_experiment(obj) is not None


class ExperimentController:
    """Runs Katib Experiments of TrainJobs against one API server."""

    def __init__(
        self,
        client: KubeClient,
        *,
        concurrency: int = 2,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rand: Callable[[int], int] = random.randrange,
    ) -> None:
        self.client = client
        self.concurrency = concurrency
        self._clock = clock
        self._rand = rand
        self.experiments = Informer(client, EXPERIMENT)
        self.trials = Informer(
            client,
            TRIAL,
            keep=lambda o: EXPERIMENT_LABEL in obj_at(o, "metadata", "labels"),
        )
        self.trainjobs = Informer(client, TRAINJOB, keep=_trial_job)
        self.suggestions = Informer(client, SUGGESTION)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.events = EventRecorder(client, component="katib-controller", clock=clock)
        self.ready = asyncio.Event()
        self._suggesters: dict[str, Suggester] = {}  # by Experiment uid
        self.experiments.add_handler(self._on_experiment)
        self.trials.add_handler(self._on_trial)
        self.trainjobs.add_handler(self._on_trainjob)

    # --- events -> keys -------------------------------------------------------------------

    def _on_experiment(self, event_type: str, obj: Obj) -> None:
        if event_type == "DELETED":
            self._suggesters.pop(str(obj["metadata"].get("uid")), None)
            return
        self.queue.add(object_key(obj))

    def _on_trial(self, _type: str, obj: Obj) -> None:
        namespace, _ = object_key(obj)
        self.queue.add((namespace, str(obj["metadata"]["labels"][EXPERIMENT_LABEL])))

    def _on_trainjob(self, _type: str, obj: Obj) -> None:
        namespace, name = object_key(obj)
        trial = self.trials.get(name, namespace)
        if trial is not None:
            self._on_trial(_type, trial)
        else:
            for ref in dicts(obj["metadata"].get("ownerReferences")):
                if ref.get("kind") == "Experiment":
                    self.queue.add((namespace, str(ref.get("name"))))

    # --- running ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await run_loop(
                [self.experiments, self.trials, self.trainjobs, self.suggestions],
                self.queue, lambda key: self.reconcile(*key), failure_logger(log, "experiment"),
                stop, concurrency=self.concurrency, ready=self.ready, name="katib",
            )  # fmt: skip
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.events.flush(), 5.0)

    # --- one reconcile ----------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> float | None:
        experiment = self.experiments.get(name, namespace)
        if experiment is None or experiment["metadata"].get("deletionTimestamp"):
            return None
        trials = [
            t for t in self.trials.items()
            if object_key(t)[0] == namespace and t["metadata"]["labels"].get(EXPERIMENT_LABEL) == name
        ]  # fmt: skip
        trials.sort(
            key=lambda t: (t["metadata"].get("creationTimestamp") or "", t["metadata"]["name"])
        )
        await self._delete_orphans(experiment, trials)
        requeue: float | None = None
        for i, trial in enumerate(trials):
            trials[i], wait = await self._advance_trial(trial)
            if wait is not None:
                requeue = wait if requeue is None else min(requeue, wait)
        failure = self._suggestion_failure(experiment)
        status = experiment_status(experiment, trials, _now(self._clock), failure)
        experiment = await self._write_status(EXPERIMENT, experiment, status, self.experiments)
        wanted = trials_wanted(experiment, trials)
        if wanted > 0:
            created = await self._start_trials(experiment, trials, wanted)
            if created is None:  # the Suggestion failed: the Experiment fails with it
                return 0.0
        if is_finished(experiment):
            await self._finish_suggestion(experiment)
        return requeue

    async def _delete_orphans(self, experiment: Obj, trials: list[Obj]) -> None:
        names = {t["metadata"]["name"] for t in trials}
        uid = experiment["metadata"].get("uid")
        for job in self.trainjobs.items():
            meta = job["metadata"]
            refs = list_at(meta, "ownerReferences")
            if (
                meta.get("namespace") != experiment["metadata"]["namespace"]
                or meta["name"] in names
            ):
                continue
            # Not a new one: it may be waiting for its Trial at this very moment.
            if (
                len(refs) == 1
                and refs[0].get("uid") == uid
                and _age_s(str(meta.get("creationTimestamp") or ""), self._clock) > 5
            ):
                with contextlib.suppress(ApiError):
                    await self.client.delete(
                        TRAINJOB.api_version,
                        TRAINJOB.plural,
                        meta["name"],
                        namespace=meta["namespace"],
                    )

    async def _advance_trial(self, trial: Obj) -> tuple[Obj, float | None]:
        """The Trial after looking at its TrainJob (status written when it changed)."""
        namespace, name = object_key(trial)
        job = self.trainjobs.get(name, namespace)
        if is_completed(trial):
            return trial, None
        if job is None:
            return trial, None
        await self._adopt(trial, job)
        outcome, _ = job_outcome(trial, job)
        observed = None
        requeue = None
        if outcome == "Running" and obj_at(trial, "spec").get("earlyStoppingRules"):
            stopped = await self._maybe_stop_early(trial, job)
            if stopped is not None:
                return stopped, None
            requeue = 1.0  # the rule is checked on the trial's output as it runs
        if outcome in ("Succeeded", "Failed"):
            observed = await self._collect(trial, job)
        elif obj_at(job, "status").get("trainerStatus"):
            # Beyond Katib: the running observation from TrainJob progress reports.
            observed = self._progress_observation(trial, job)
        status = next_trial_status(trial, job, observed, _now(self._clock))
        if outcome == "Running" and observed is not None:
            status["observation"] = observed
        return await self._write_status(TRIAL, trial, status, self.trials), requeue

    async def _objective_values(self, trial: Obj) -> list[float]:
        metric = str(obj_at(trial, "spec", "objective").get("objectiveMetricName"))
        values = []
        for entry in await self._stdout_logs(trial, [metric]):
            try:
                values.append(float(entry.value))
            except ValueError:
                continue
        return values

    async def _early_stopping_rules(
        self, experiment: Obj, trials: list[Obj]
    ) -> list[dict[str, Any]]:
        if not obj_at(experiment["spec"], "earlyStopping").get("algorithmName"):
            return []
        histories = [
            await self._objective_values(t) for t in trials if trial_state(t) == "Succeeded"
        ]
        return median_stop_rule(experiment, histories)

    async def _maybe_stop_early(self, trial: Obj, job: Obj) -> Obj | None:
        """medianstop: suspend the TrainJob (its processes stop) and mark the Trial EarlyStopped
        when its objective so far breaks a rule at the rule's start step."""
        spec = obj_at(trial, "spec")
        values = await self._objective_values(trial)
        maximize = obj_at(spec, "objective").get("type") == "maximize"
        if not should_stop(dicts(spec.get("earlyStoppingRules")), values, maximize):
            return None
        namespace, name = object_key(trial)
        await self.client.patch(
            TRAINJOB.api_version,
            TRAINJOB.plural,
            name,
            {"spec": {"suspend": True}},
            namespace=namespace,
        )
        now = _now(self._clock)
        logs = await self._stdout_logs(trial, self._metric_names(trial))
        status = json.loads(json.dumps(obj_at(trial, "status")))
        status["observation"] = observation(
            logs, dicts(obj_at(spec, "objective").get("metricStrategies"))
        )
        conditions = status.setdefault("conditions", [])
        set_condition(
            conditions,
            condition("Running", "TrialNotRunning", "Trial is not running", now, "False"),
        )
        set_condition(
            conditions,
            condition("EarlyStopped", "TrialEarlyStopped", "Trial is early stopped", now),
        )
        status["completionTime"] = now
        self.events.record(
            trial, "Normal", "TrialEarlyStopped", f"Trial {name} is early stopped by medianstop"
        )
        return await self._write_status(TRIAL, trial, status, self.trials)

    async def _adopt(self, trial: Obj, job: Obj) -> None:
        """Hand the TrainJob from the Experiment to its Trial (see the module's docstring)."""
        refs = dicts(job["metadata"].get("ownerReferences"))
        uid = trial["metadata"].get("uid")
        if any(r.get("uid") == uid for r in refs):
            return
        owner = trainjob_for(trial)["metadata"]["ownerReferences"]
        patch = [{"op": "replace", "path": "/metadata/ownerReferences", "value": owner}]
        with contextlib.suppress(ApiError):
            updated = await self.client.patch(
                TRAINJOB.api_version,
                TRAINJOB.plural,
                job["metadata"]["name"],
                patch,
                namespace=job["metadata"]["namespace"],
                patch_type="json",
            )
            self.trainjobs.observe(updated)

    def _metric_names(self, trial: Obj) -> list[str]:
        objective = obj_at(trial, "spec", "objective")
        return [str(s["name"]) for s in dicts(objective.get("metricStrategies"))]

    def _progress_logs(self, trial: Obj, job: Obj) -> list[MetricLog]:
        trainer = obj_at(job, "status", "trainerStatus")
        stamp = str(trainer.get("lastUpdatedTime") or "0001-01-01T00:00:00Z")
        names = set(self._metric_names(trial))
        return [
            MetricLog(str(m["name"]), str(m["value"]), stamp)
            for m in dicts(trainer.get("metrics"))
            if m.get("name") in names
        ]

    def _progress_observation(self, trial: Obj, job: Obj) -> dict[str, Any] | None:
        """Fold the TrainJob's latest progress report into the Trial's observation so far."""
        logs = self._progress_logs(trial, job)
        if not logs:
            return None
        old = dicts(obj_at(trial, "status", "observation").get("metrics"))
        seen: list[MetricLog] = []
        for metric in old:
            for key in ("min", "max"):
                seen.append(MetricLog(metric["name"], str(metric[key]), "0001-01-01T00:00:00Z"))
        strategies = dicts(obj_at(trial, "spec", "objective").get("metricStrategies"))
        folded = observation([*seen, *logs], strategies)
        return folded

    async def _collect(self, trial: Obj, job: Obj) -> dict[str, Any]:
        """Metrics of a finished trial: the primary pod's output (StdOut) and the TrainJob's
        progress reports, folded as Katib folds its observation logs."""
        spec = obj_at(trial, "spec")
        names = self._metric_names(trial)
        logs = await self._stdout_logs(trial, names)
        logs += self._progress_logs(trial, job)
        old = dicts(obj_at(trial, "status", "observation").get("metrics"))
        for metric in old:  # progress reports seen while it ran
            logs += [
                MetricLog(metric["name"], str(metric[k]), "0001-01-01T00:00:00Z")
                for k in ("min", "max")
                if metric.get(k) not in (None, "unavailable")
            ]
        return observation(logs, dicts(obj_at(spec, "objective").get("metricStrategies")))

    async def _stdout_logs(self, trial: Obj, names: list[str]) -> list[MetricLog]:
        spec = obj_at(trial, "spec")
        collector = obj_at(spec, "metricsCollector")
        source = obj_at(collector, "source")
        formats = list_at(source, "filter", "metricsFormat")
        namespace, name = object_key(trial)
        labels = {"jobset.sigs.k8s.io/jobset-name": name, **obj_at(spec, "primaryPodLabels")}
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        pods, _ = await self.client.list(
            POD.api_version, POD.plural, namespace=namespace, label_selector=selector
        )
        if not pods:
            return []
        # The last instance of the primary pod (a restarted JobSet makes new pods).
        pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        pod = pods[-1]
        try:
            lines = self.client.log_lines(
                pod["metadata"]["name"],
                namespace=namespace,
                container=str(spec.get("primaryContainerName") or "node"),
            )
            text = "".join([line + "\n" async for line in lines])
        except ApiError as err:
            log.info("trial %s: no output to read metrics from: %s", name, err)
            return []
        kind = obj_at(collector, "collector").get("kind")
        if kind == "File":
            # What the primary container printed after its metrics file marker (see
            # kubetrain.runtime.katib.admission); nothing when the file never appeared.
            text = text.partition(METRICS_FILE_MARKER + "\n")[2]
            fmt = obj_at(source, "fileSystemPath").get("format")
            return parse_metric_lines(text, names, formats, json_lines=fmt == "JSON")
        return parse_metric_lines(text, names, formats)

    def _suggestion_failure(self, experiment: Obj) -> tuple[str, str] | None:
        namespace, name = object_key(experiment)
        suggestion = self.suggestions.get(name, namespace)
        for cond in dicts(obj_at(suggestion, "status").get("conditions")):
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                return "ExperimentFailed", f"Suggestion has failed: {cond.get('message', '')}"
        return None

    async def _start_trials(self, experiment: Obj, trials: list[Obj], wanted: int) -> int | None:
        meta = experiment["metadata"]
        uid = str(meta.get("uid"))
        suggestion = await self._ensure_suggestion(experiment, len(trials) + wanted)
        try:
            suggester = self._suggesters.get(uid)
            if suggester is None:
                suggester = await asyncio.to_thread(Suggester, experiment)
                self._suggesters[uid] = suggester
            assignments = await asyncio.to_thread(suggester.suggest, trials, wanted)
        except (SuggestionError, ValueError) as err:
            await self._fail_suggestion(suggestion, str(err))
            self.events.record(experiment, "Warning", "SuggestionFailed", str(err))
            return None
        created = 0
        try:
            rules = await self._early_stopping_rules(experiment, trials)
            for assignment in assignments:
                name = trial_name(meta["name"], self._rand)
                trial, job = new_trial(experiment, name, assignment, _now(self._clock))
                if rules:
                    trial["spec"]["earlyStoppingRules"] = rules
                job["metadata"]["ownerReferences"] = [
                    {
                        "apiVersion": KATIB_API_VERSION,
                        "kind": "Experiment",
                        "name": meta["name"],
                        "uid": uid,
                        "controller": False,
                        "blockOwnerDeletion": True,
                    }
                ]
                job_obj = await self.client.create(TRAINJOB.api_version, TRAINJOB.plural, job)
                self.trainjobs.observe(job_obj)
                status = trial.pop("status")
                made = await self.client.create(TRIAL.api_version, TRIAL.plural, trial)
                suggester.bind(name)
                made = await self.client.patch(
                    TRIAL.api_version,
                    TRIAL.plural,
                    name,
                    {"status": status},
                    namespace=meta["namespace"],
                    subresource="status",
                )
                self.trials.observe(made)
                trials.append(made)
                await self._adopt(made, job_obj)
                created += 1
                self.events.record(made, "Normal", "JobCreated", f"TrainJob {name} is created")
        finally:
            suggester.discard_pending()  # left only when a create failed
        await self._record_suggestions(suggestion, trials)
        return created

    async def _ensure_suggestion(self, experiment: Obj, requests: int) -> Obj:
        namespace, name = object_key(experiment)
        spec = experiment["spec"]
        body = {
            "apiVersion": KATIB_API_VERSION,
            "kind": "Suggestion",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {EXPERIMENT_LABEL: name},
                "ownerReferences": [
                    {
                        "apiVersion": KATIB_API_VERSION,
                        "kind": "Experiment",
                        "name": name,
                        "uid": experiment["metadata"].get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "algorithm": spec.get("algorithm"),
                "requests": requests,
                "resumePolicy": spec.get("resumePolicy", "Never"),
                **({"earlyStopping": spec["earlyStopping"]} if spec.get("earlyStopping") else {}),
            },
        }
        existing = self.suggestions.get(name, namespace)
        if existing is None:
            try:
                existing = await self.client.create(SUGGESTION.api_version, SUGGESTION.plural, body)
            except ApiError as err:
                if not err.conflict:
                    raise
                existing = await self.client.get(
                    SUGGESTION.api_version, SUGGESTION.plural, name, namespace=namespace
                )
            now = _now(self._clock)
            existing = await self._write_status(
                SUGGESTION,
                existing,
                {
                    "startTime": now,
                    "suggestionCount": 0,
                    "conditions": [
                        condition("Created", "SuggestionCreated", "Suggestion is created", now),
                        condition("Running", "SuggestionRunning", "Suggestion is running", now),
                    ],
                },
                self.suggestions,
            )
        elif existing["spec"].get("requests") != requests:
            existing = await self.client.patch(
                SUGGESTION.api_version,
                SUGGESTION.plural,
                name,
                {"spec": {"requests": requests}},
                namespace=namespace,
            )
            self.suggestions.observe(existing)
        return existing

    async def _record_suggestions(self, suggestion: Obj, trials: list[Obj]) -> None:
        status = json.loads(json.dumps(obj_at(suggestion, "status")))
        status["suggestionCount"] = len(trials)
        status["suggestions"] = [
            {
                "name": t["metadata"]["name"],
                "parameterAssignments": t["spec"]["parameterAssignments"],
            }
            for t in trials
        ]
        await self._write_status(SUGGESTION, suggestion, status, self.suggestions)

    async def _fail_suggestion(self, suggestion: Obj, message: str) -> None:
        status = json.loads(json.dumps(obj_at(suggestion, "status")))
        now = _now(self._clock)
        conditions = [c for c in dicts(status.get("conditions")) if c.get("type") != "Running"]
        conditions.append(
            condition("Running", "SuggestionNotRunning", "Suggestion is not running", now, "False")
        )
        conditions.append(condition("Failed", "SuggestionFailed", message, now))
        status["conditions"] = conditions
        await self._write_status(SUGGESTION, suggestion, status, self.suggestions)

    async def _finish_suggestion(self, experiment: Obj) -> None:
        namespace, name = object_key(experiment)
        suggestion = self.suggestions.get(name, namespace)
        if suggestion is None:
            return
        conditions = dicts(obj_at(suggestion, "status").get("conditions"))
        if any(
            c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
            for c in conditions
        ):
            return
        if experiment["spec"].get("resumePolicy") == "LongRunning":
            return
        now = _now(self._clock)
        status = json.loads(json.dumps(obj_at(suggestion, "status")))
        status["conditions"] = [c for c in conditions if c.get("type") != "Running"]
        status["conditions"] += [
            condition("Running", "SuggestionNotRunning", "Suggestion is not running", now, "False"),
            condition("Succeeded", "SuggestionSucceeded", "Suggestion is succeeded", now),
        ]
        status["completionTime"] = now
        await self._write_status(SUGGESTION, suggestion, status, self.suggestions)

    async def _write_status(
        self, kind: Kind, obj: Obj, status: Mapping[str, Any], cache: Informer
    ) -> Obj:
        if obj_at(obj, "status") == status:
            return obj
        namespace, name = object_key(obj)
        patch = [{"op": "add", "path": "/status", "value": dict(status)}]
        updated = await self.client.patch(
            kind.api_version,
            kind.plural,
            name,
            patch,
            namespace=namespace,
            patch_type="json",
            subresource="status",
        )
        cache.observe(updated)
        return updated


def _age_s(stamp: str, clock: Callable[[], datetime]) -> float:
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return 0.0
    return (clock() - then).total_seconds()
