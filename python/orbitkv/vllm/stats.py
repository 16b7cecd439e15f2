"""What ``OrbitKVConnector`` costs and does inside vLLM, as vLLM's connector
statistics and Prometheus metrics.

vLLM 0.32 collects a connector's ``get_kv_connector_stats()`` from the
scheduler process and from every worker each step, merges them with
``KVConnectorStats.aggregate`` and hands the sum to the connector's
``build_prom_metrics`` object in the API server, which exports it on the
server's own ``/metrics`` (vllm/v1/core/sched/scheduler.py,
vllm/distributed/kv_transfer/kv_connector/v1/metrics.py). So an operator
scrapes these beside ``vllm:external_prefix_cache_hits_total``:

=========================================  ================================
metric                                     meaning
=========================================  ================================
``vllm:orbitkv_scheduler_seconds_total``   wall seconds in the connector's
                                           scheduler-side calls (the
                                           engine's step waits on them)
``vllm:orbitkv_scheduler_calls_total``     those calls
``vllm:orbitkv_restored_blocks_total``     blocks restored into vLLM's KV
``vllm:orbitkv_published_blocks_total``    blocks newly stored in OrbitKV
``vllm:orbitkv_load_error_blocks_total``   blocks offered but not restored
                                           (vLLM recomputed them)
``vllm:orbitkv_deferred_lookups_total``    lookups put off a step: the
                                           Manager's operation bounds or
                                           lease limits were full
``vllm:orbitkv_refused_lookups_total``     requests made a miss by such a
                                           refusal (no pin of ours to
                                           wait for, or load_timeout_s)
``vllm:orbitkv_load_wait_seconds``         histogram: per step, how long
                                           the worker's step waited for its
                                           restores (steps with loads only)
``vllm:orbitkv_step_block_seconds``        histogram: per engine step and
                                           side (scheduler, each worker),
                                           wall seconds the connector's
                                           calls held that step
=========================================  ================================

``STAT_KEYS``: the data dict's keys; counters are ints or floats that add,
``load_wait_s`` and ``step_block_s`` lists of per-step figures that
concatenate.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

__all__ = ["OrbitKVConnectorStats", "build_prom_metrics", "Interval", "STAT_KEYS", "LOAD_WAIT_BUCKETS_S"]

#: Counter keys of the stats data (summed by ``aggregate``).
COUNTERS = ("scheduler_s", "scheduler_calls", "restored_blocks", "published_blocks", "load_error_blocks",
            "deferred_lookups", "refused_lookups")
#: Per-step lists of the stats data (concatenated by ``aggregate``).
LISTS = ("load_wait_s", "step_block_s")
#: Every key of the stats data.
STAT_KEYS = COUNTERS + LISTS
#: Histogram buckets (seconds) of ``vllm:orbitkv_load_wait_seconds``: the
#: 2 and 2.5 s edges tell whether a step waited past a 2 s load_timeout_s.
LOAD_WAIT_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0,
                       30.0)

try:  # pragma: no cover - needs vLLM
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (  # type: ignore
        KVConnectorPromMetrics,
        KVConnectorStats,
    )
except Exception:  # no vLLM: plain stand-ins with the same shape
    @dataclasses.dataclass
    class KVConnectorStats:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorStats`` (a ``data`` dict)."""

        data: dict = dataclasses.field(default_factory=dict)

    class KVConnectorPromMetrics:  # type: ignore[no-redef]
        """Stand-in for vLLM's ``KVConnectorPromMetrics``."""

        def __init__(self, vllm_config: Any, metric_types: dict, labelnames: list, per_engine_labelvalues: dict):
            self._counter_cls = self._histogram_cls = None
            self._labelnames = labelnames
            self.per_engine_labelvalues = per_engine_labelvalues


def _empty() -> dict[str, Any]:
    d: dict[str, Any] = {k: 0 for k in COUNTERS}
    d["scheduler_s"] = 0.0
    for k in LISTS:
        d[k] = []
    return d


@dataclasses.dataclass
class OrbitKVConnectorStats(KVConnectorStats):
    """The connector's figures of one stats interval (``data``: ``STAT_KEYS``)."""

    def __post_init__(self) -> None:
        full = _empty()
        full.update(self.data or {})
        self.data = full

    def reset(self) -> None:
        self.data = _empty()

    def aggregate(self, other: "KVConnectorStats") -> "OrbitKVConnectorStats":
        od = getattr(other, "data", None) or {}
        for k in COUNTERS:
            self.data[k] += od.get(k, 0)
        for k in LISTS:
            self.data[k] = list(self.data[k]) + list(od.get(k, ()))
        return self

    def reduce(self) -> dict[str, int | float]:
        waits = self.data["load_wait_s"]
        out: dict[str, int | float] = {k: self.data[k] for k in COUNTERS}
        out["scheduler_s"] = round(float(self.data["scheduler_s"]), 6)
        out["load_wait_max_s"] = round(max(waits), 6) if waits else 0.0
        blocks = self.data["step_block_s"]
        out["step_block_max_s"] = round(max(blocks), 6) if blocks else 0.0
        return out

    def is_empty(self) -> bool:
        return not any(self.data[k] for k in LISTS) and not any(self.data[k] for k in COUNTERS)


class Interval:
    """One side's figures since the last ``take()``: ``timed`` runs a
    scheduler-side call, ``held`` a worker-side one, each adding its wall
    time to this step's hold; ``end_step()`` records the step's hold;
    ``add(key, n)`` counts; ``wait(s)`` records a step's load wait. Not
    thread-safe (each side is used from one thread)."""

    def __init__(self) -> None:
        self.data = _empty()
        self._step_s = 0.0   # wall seconds this step's connector calls held the engine so far

    def add(self, key: str, n: int | float) -> None:
        self.data[key] += n

    def wait(self, seconds: float) -> None:
        self.data["load_wait_s"].append(seconds)

    def timed(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, its wall time added to ``scheduler_s``."""
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            dt = time.perf_counter() - t
            self.data["scheduler_s"] += dt
            self.data["scheduler_calls"] += 1
            self._step_s += dt

    def held(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, its wall time added to this step's hold only."""
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._step_s += time.perf_counter() - t

    def end_step(self) -> None:
        """Record this step's hold (``step_block_s``) when it held at all."""
        if self._step_s > 0:
            self.data["step_block_s"].append(self._step_s)
            self._step_s = 0.0

    def take(self) -> OrbitKVConnectorStats | None:
        """The interval's stats (None when nothing happened), and a new interval."""
        s = OrbitKVConnectorStats(data=self.data)
        self.data = _empty()
        return None if s.is_empty() else s


class _Prom(KVConnectorPromMetrics):
    def __init__(self, vllm_config: Any, metric_types: dict, labelnames: list, per_engine_labelvalues: dict):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        from vllm.v1.metrics.utils import create_metric_per_engine  # type: ignore

        def counter(name: str, doc: str) -> dict:
            return create_metric_per_engine(self._counter_cls(name=name, documentation=doc, labelnames=labelnames),
                                            per_engine_labelvalues)

        self.counters = {
            "scheduler_s": counter("vllm:orbitkv_scheduler_seconds",
                                   "Wall seconds in OrbitKVConnector's scheduler-side calls."),
            "scheduler_calls": counter("vllm:orbitkv_scheduler_calls", "OrbitKVConnector's scheduler-side calls."),
            "restored_blocks": counter("vllm:orbitkv_restored_blocks",
                                       "Blocks OrbitKV restored into vLLM's KV cache."),
            "published_blocks": counter("vllm:orbitkv_published_blocks", "Blocks newly stored in OrbitKV."),
            "load_error_blocks": counter("vllm:orbitkv_load_error_blocks",
                                         "Blocks offered by OrbitKV but not restored (vLLM recomputed them)."),
            "deferred_lookups": counter("vllm:orbitkv_deferred_lookups",
                                        "Lookups put off to the next step: the Manager's operation bounds or lease "
                                        "limits were full."),
            "refused_lookups": counter("vllm:orbitkv_refused_lookups",
                                       "Requests treated as a miss after such a refusal: no pin of this scheduler "
                                       "to wait for, or load_timeout_s passed."),
        }
        self.load_wait = create_metric_per_engine(self._histogram_cls(
            name="vllm:orbitkv_load_wait_seconds",
            documentation="Per engine step with OrbitKV loads: seconds the step waited for its restores.",
            buckets=list(LOAD_WAIT_BUCKETS_S), labelnames=labelnames), per_engine_labelvalues)
        self.step_block = create_metric_per_engine(self._histogram_cls(
            name="vllm:orbitkv_step_block_seconds",
            documentation="Per engine step and side (scheduler, each worker): seconds OrbitKV's calls held the step.",
            buckets=list(LOAD_WAIT_BUCKETS_S), labelnames=labelnames), per_engine_labelvalues)

    def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0) -> None:
        for key, c in self.counters.items():
            v = transfer_stats_data.get(key, 0)
            if v:
                c[engine_idx].inc(v)
        for w in transfer_stats_data.get("load_wait_s", ()):
            self.load_wait[engine_idx].observe(w)
        for b in transfer_stats_data.get("step_block_s", ()):
            self.step_block[engine_idx].observe(b)


def build_prom_metrics(vllm_config: Any, metric_types: dict, labelnames: list,
                       per_engine_labelvalues: dict) -> KVConnectorPromMetrics:
    """The connector's Prometheus metrics (module docs), registered in the
    API server through vLLM's ``metric_types``."""
    return _Prom(vllm_config, metric_types, labelnames, per_engine_labelvalues)
