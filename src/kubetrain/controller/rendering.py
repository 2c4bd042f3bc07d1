"""The seam between the controller and the pure runtime layer.

Every rule about what a TrainJob becomes (objects, the snapshot, conditions, the deadline) lives
in ``kubetrain.runtime``; this module only fixes the gates and environment once and turns its
results into one small value the reconciler consumes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from kubetrain.api.types import Obj
from kubetrain.runtime.config import Environment, FeatureGates
from kubetrain.runtime.framework import Existing, ObjectRef, RenderError
from kubetrain.runtime.render import existing_refs, render, runtime_not_found
from kubetrain.runtime.status import derive

__all__ = ["Outcome", "RenderFailed", "Renderer", "with_ssh_keys"]

log = logging.getLogger(__name__)


class RenderFailed(Exception):
    """The TrainJob and its runtime do not render (upstream: NewObjects returned an error)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one reconcile should do: apply ``objects``, write ``status``, maybe delete the
    JobSet (active deadline passed), and come back after ``requeue_after`` seconds."""

    objects: list[Obj]
    status: Obj
    warnings: list[str] = field(default_factory=list)
    requeue_after: float | None = None
    delete_jobset: bool = False


def with_ssh_keys(environment: Environment) -> Environment:
    """``environment`` able to make MPI SSH key pairs: render is pure and leaves the key source
    to its caller, and a controller must always be able to create a job's key pair."""
    default = next(f.default for f in fields(Environment) if f.name == "ssh_keypair")
    if environment.ssh_keypair is not default:
        return environment
    from kubetrain.runtime.sshkeys import generate_ssh_keypair

    return replace(environment, ssh_keypair=generate_ssh_keypair)


@dataclass(frozen=True, slots=True)
class Renderer:
    """``kubetrain.runtime``'s render and status derivation under fixed gates and environment
    (an environment without an SSH key source gets the real generator)."""

    gates: FeatureGates = field(default_factory=FeatureGates)
    environment: Environment = field(default_factory=Environment)

    def __post_init__(self) -> None:
        object.__setattr__(self, "environment", with_ssh_keys(self.environment))

    def existing_refs(self, trainjob: Obj, runtime: Obj) -> list[ObjectRef]:
        """The uncached children ``render`` needs to see (named by the plugins)."""
        return existing_refs(trainjob, runtime, gates=self.gates, environment=self.environment)

    def render(
        self, trainjob: Obj, runtime: Obj | None, existing: Sequence[Obj], now: datetime
    ) -> Outcome:
        """Objects and status; ``existing`` are the live children (JobSet, snapshot, ...)."""
        try:
            plan = render(
                trainjob,
                runtime,
                gates=self.gates,
                environment=self.environment,
                existing=Existing.of(*existing),
                now=now,
            )
        except RenderError as err:
            raise RenderFailed(str(err)) from err
        except Exception as err:
            # Render is pure, so a crash in it repeats on every retry: report it like any other
            # render failure (visible on the TrainJob) rather than retrying silently for ever.
            log.exception("render crashed")
            raise RenderFailed(
                f"internal error while rendering: {type(err).__name__}: {err}"
            ) from err
        return Outcome(
            objects=list(plan.objects),
            status=plan.trainjob_status,
            warnings=list(plan.warnings),
            requeue_after=plan.requeue_after,
            delete_jobset=plan.delete_jobset,
        )

    def derive(self, trainjob: Obj, jobset: Obj | None, now: datetime) -> Outcome:
        """Status only (nothing to apply): for finished jobs and jobs that cannot render."""
        update = derive(trainjob, jobset, now=now)
        return Outcome(
            objects=[],
            status=update.status,
            requeue_after=update.requeue_after,
            delete_jobset=update.delete_jobset,
        )

    @staticmethod
    def runtime_not_found(kind: str, name: str) -> str:
        """Upstream's message for a runtime that does not exist."""
        return runtime_not_found(kind, name)
