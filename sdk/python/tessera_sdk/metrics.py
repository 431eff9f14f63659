"""A run's progress history: what its loss chart draws, and where each attempt resumed."""

import dataclasses
import datetime
from typing import List, Optional

from ._proto import run_metrics_pb2, runs_pb2
from .connection import Client
from .runs import RunRef, _client, _name, _time

__all__ = ["MetricPoint", "AttemptSummary", "RunMetrics", "get_run_metrics"]


@dataclasses.dataclass(frozen=True)
class MetricPoint:
    attempt: int
    step: int
    time: Optional[datetime.datetime]
    loss: float
    learning_rate: float
    tokens_per_second: float
    mfu: float


@dataclasses.dataclass(frozen=True)
class AttemptSummary:
    """An attempt: the step it resumed from and, when it ended, why (ATTEMPT_END_REASON_...)."""

    attempt: int
    resumed_from_step: int
    end_reason: str
    reason: str


@dataclasses.dataclass(frozen=True)
class RunMetrics:
    run_name: str
    total_steps: int  # 0: unknown
    points: List[MetricPoint]
    attempts: List[AttemptSummary]


def get_run_metrics(run: RunRef, *, attempt: Optional[int] = None,
                    timeout: Optional[float] = 30, client: Optional[Client] = None) -> RunMetrics:
    """The run's progress reports (step, loss, learning rate, tokens/s, MFU) by attempt, then
    step; a long attempt's early points are thinned, its latest report is always there."""
    c = _client(client)
    request = run_metrics_pb2.GetRunMetricsRequest(name=_name(run))
    if attempt is not None:
        request.resumption_index = attempt
    response = c.call(c.metrics.GetRunMetrics, request, timeout)
    points = [MetricPoint(p.resumption_index, p.step, _time(p.time), p.loss, p.learning_rate,
                          p.tokens_per_second, p.mfu) for p in response.points]
    attempts = [AttemptSummary(a.resumption_index, a.resumed_from_step,
                               runs_pb2.AttemptEndReason.Name(a.end_reason), a.reason)
                for a in response.attempts]
    return RunMetrics(response.run_name, response.total_steps, points, attempts)
