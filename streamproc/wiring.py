"""The composition root: settings in; judges (models, calibrators), the judge runner, the
worker's loops and the gate out.

Every entry point - the worker, the offline evaluation, the benchmarks - builds its
judge with :mod:`streamproc.inference.judges` (re-exported here), so one setting means
the same judge everywhere and the judge library never reads settings itself. The wings
never read ``Settings`` either: what they are told comes as their own option groups, or
as small frozen option objects built here once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from streamproc.config import Settings
from streamproc.inference.judges import (
    available_judges,
    build_judge,
    build_nli_judge,
    judge_key_of,
    judge_limits,
    measured_accuracy,
    nli_options,
    record_checks,
)

if TYPE_CHECKING:
    from streamproc.evaluate.calibration.label_refit import RefitOptions
    from streamproc.gate.sensor import GateSensor
    from streamproc.gate.service import GateService
    from streamproc.kafka.consumer import ConsumerLoop
    from streamproc.monitor.judging_loop import JudgeLoop
    from streamproc.monitor.windows.loop import WindowLoop
    from streamproc.review.labels.accuracy_loop import AccuracyLoop
    from streamproc.review.labels.loop import LabelsLoop
    from streamproc.telemetry.metrics import WorkerMetrics
    from streamproc.telemetry.otel import Telemetry
    from streamproc.verdicts.runner import JudgeRunner, LogOptions

__all__ = [
    "WorkerLoops",
    "available_judges",
    "build_gate",
    "build_judge",
    "build_loops",
    "build_nli_judge",
    "judge_key_of",
    "judge_limits",
    "judge_runner",
    "may_label",
    "measured_accuracy",
    "nli_options",
    "record_checks",
    "refit_options",
]


def judge_runner(settings: Settings, *, log: LogOptions | None = None) -> JudgeRunner:
    """The runner ``worker.judge_process`` asks for. In-thread, the judge is built here
    (models loaded before the worker joins its groups); in a process, by the child at
    :meth:`JudgeRunner.start`."""
    from streamproc.verdicts.runner import JudgeProcess, JudgeThread

    if settings.worker.judge_process:
        return JudgeProcess(partial(build_judge, settings.judge), log)
    return JudgeThread(build_judge(settings.judge))


@dataclass(frozen=True)
class WorkerLoops:
    """The consumer loops of one worker process: judging and windows always; the labels
    and accuracy loops of the reviewers' loop unless ``labels.enabled`` is off."""

    judging: JudgeLoop
    windows: WindowLoop
    labels: LabelsLoop | None = None
    accuracy: AccuracyLoop | None = None

    def all(self) -> list[ConsumerLoop]:
        """Every loop, in start order."""
        loops: list[ConsumerLoop] = [self.judging, self.windows]
        loops.extend(each for each in (self.labels, self.accuracy) if each is not None)
        return loops


def may_label(settings: Settings) -> Callable[[str, str], bool]:
    """Whether a reviewer may label a tenant's answers: the tokens file's reviewers and
    their tenants (``review.tokens_file``); without one, labels on the topic are trusted
    (who may write to it is the broker's ACLs' business) and only their tenant must match
    the answer's."""
    from streamproc.review.page.auth import reviewers_for

    reviewers = reviewers_for(settings)
    if reviewers is None:
        return lambda reviewer, tenant: True

    def allowed(reviewer: str, tenant: str) -> bool:
        found = reviewers.by_name(reviewer)
        return found is not None and found.may_see(tenant)

    return allowed


def build_loops(
    settings: Settings, runner: JudgeRunner, *, telemetry: Telemetry, metrics: WorkerMetrics
) -> WorkerLoops:
    """The judging loop over ``runner`` and the window loop with its alert hooks, both
    reporting to ``telemetry`` and ``metrics``."""
    from streamproc.kafka.security import aiokafka_options
    from streamproc.monitor.judging_loop import JudgeLoop
    from streamproc.monitor.windows.alert_stage import AlertHooks
    from streamproc.monitor.windows.live_accuracy import LiveAccuracy
    from streamproc.monitor.windows.loop import WindowLoop
    from streamproc.review.labels.accuracy_loop import AccuracyLoop
    from streamproc.review.labels.loop import LabelsLoop

    options = aiokafka_options(settings.security)
    alerting = AlertHooks(settings, metrics)
    key = judge_key_of(settings.judge)
    live = settings.labels.enabled
    return WorkerLoops(
        judging=JudgeLoop(
            settings,
            runner,
            client_options=options,
            telemetry=telemetry,
            metrics=metrics,
            judge_key=key,
        ),
        windows=WindowLoop(
            settings,
            client_options=options,
            telemetry=telemetry,
            accuracy=measured_accuracy(settings.judge),
            live_accuracy=LiveAccuracy(settings, client_options=options) if live else None,
            judge_key=key,
            in_transaction=alerting.in_transaction,
            after_commit=alerting.after_commit,
        ),
        labels=(
            LabelsLoop(
                settings, client_options=options, sensor=metrics, may_label=may_label(settings)
            )
            if live
            else None
        ),
        accuracy=AccuracyLoop(settings, client_options=options, sensor=metrics) if live else None,
    )


def build_gate(settings: Settings, *, telemetry: Telemetry, sensor: GateSensor) -> GateService:
    """The inline gate's service over the judge ``settings.judge`` configure, in this
    process (its judge thread), tracing to ``telemetry`` and reporting to ``sensor``."""
    from streamproc.gate.service import GateService
    from streamproc.gate.span_tracing import gate_tracing

    return GateService(
        settings,
        build_judge(settings.judge),
        judge_key=judge_key_of(settings.judge),
        sensor=sensor,
        tracing=gate_tracing(telemetry),
    )


def refit_options(settings: Settings) -> RefitOptions:
    """What ``calibrate --from-labels`` reads of ``settings``: the judge, ``worker.batch_max``
    and ``labels.target_precision``."""
    from streamproc.evaluate.calibration.label_refit import RefitOptions

    return RefitOptions(
        judge=settings.judge,
        batch_max=settings.worker.batch_max,
        target_precision=settings.labels.target_precision,
    )
