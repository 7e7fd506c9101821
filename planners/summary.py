"""The go/no-go summary of a stack: what it asks for, what its runs take, and what that costs
on demand, decided once here and exported (stack output `summary`) for `make render` to print.

Costs are estimates from facts.pricing, for on-demand capacity only; Spot, reservations and the
Dynamic Workload Scheduler are priced otherwise and say so. A run's duration is known only where
its model has a published step time at exactly the run's layout (facts.models.StepTime).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from facts import pricing
from facts.gke import CapacityType
from planners.pools import PoolFacts
from planners.runs import RunSpec


@dataclass(frozen=True)
class PoolLine:
    name: str
    machine_type: str
    nodes: int
    gpus: int
    capacity: str
    reservation: str | None
    # USD per hour with every node up, on demand; None where not priced (see `pricing`).
    usd_per_hour: float | None
    pricing: str


@dataclass(frozen=True)
class RunLine:
    name: str
    model: str
    pool: str
    nodes: int
    gpus: int
    steps: int
    step_time_s: float | None
    step_time_source: str | None
    hours: float | None
    usd: float | None


@dataclass(frozen=True)
class Summary:
    project: str
    region: str
    zone: str
    pools: tuple[PoolLine, ...]
    runs: tuple[RunLine, ...]
    price_source: str

    @property
    def usd_per_hour(self) -> float | None:
        """Every priced pool at its maximum size; None when none is priced."""
        priced = [p.usd_per_hour for p in self.pools if p.usd_per_hour is not None]
        return sum(priced) if priced else None

    def as_output(self) -> dict[str, Any]:
        """The stack output: camelCase keys, as every other output."""
        output: dict[str, Any] = _camel({**asdict(self), "usd_per_hour": self.usd_per_hour})
        return output


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {_camel_key(k): _camel(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_camel(v) for v in value]
    return value


def _camel_key(key: str) -> str:
    first, *rest = key.split("_")
    return first + "".join(part.title() for part in rest)


_NOT_ON_DEMAND = {
    CapacityType.SPOT: "Spot: not priced (a fraction of on demand, and preemptible)",
    CapacityType.RESERVATION: "reservation: not priced (paid under the reservation)",
    CapacityType.FLEX_START: "flex-start: not priced (Dynamic Workload Scheduler prices)",
    CapacityType.QUEUED_PROVISIONING: "queued provisioning: not priced (Dynamic Workload Scheduler prices)",
}


def _pool_line(pool: PoolFacts, region: str) -> PoolLine:
    price = pricing.on_demand_usd_per_hour(pool.machine_type, region)
    if pool.node_labels is not None:
        note, total = "an existing cluster's nodes: not priced", None
    elif pool.capacity_type is not CapacityType.ON_DEMAND:
        note, total = _NOT_ON_DEMAND[pool.capacity_type], None
    elif price is None:
        note, total = f"no price for {pool.machine_type} in {region} in the table", None
    else:
        note, total = f"estimate: {price:.2f} USD per node-hour on demand", price * pool.max_nodes
    return PoolLine(
        name=pool.name,
        machine_type=pool.machine_type,
        nodes=pool.max_nodes,
        gpus=pool.max_nodes * pool.machine.gpus,
        capacity=pool.capacity_type.value,
        reservation=pool.reservation,
        usd_per_hour=total,
        pricing=note,
    )


def _run_line(run: RunSpec, pool: PoolFacts, region: str, image_pinned: bool) -> RunLine:
    s = run.settings
    known = run.spec.step_time(pool.machine_type, run.nodes, s.global_batch_size, s.fp8) if image_pinned else None
    hours = s.steps * known.seconds / 3600 if known else None
    price = pricing.on_demand_usd_per_hour(pool.machine_type, region)
    on_demand = pool.capacity_type is CapacityType.ON_DEMAND
    return RunLine(
        name=run.name,
        model=run.model,
        pool=run.pool,
        nodes=run.nodes,
        gpus=run.nodes * pool.machine.gpus,
        steps=s.steps,
        step_time_s=known.seconds if known else None,
        step_time_source=known.source if known else None,
        hours=hours,
        usd=hours * run.nodes * price if hours is not None and price is not None and on_demand else None,
    )


def plan_summary(project: str, region: str, zone: str, pools: Sequence[PoolFacts], runs: Sequence[RunSpec]) -> Summary:
    by_name: Mapping[str, PoolFacts] = {p.name: p for p in pools}
    return Summary(
        project=project,
        region=region,
        zone=zone,
        pools=tuple(_pool_line(pool, region) for pool in pools),
        # A step time holds for the model's own image only.
        runs=tuple(_run_line(run, by_name[run.pool], region, run.image is None) for run in runs),
        price_source=pricing.SOURCE,
    )
