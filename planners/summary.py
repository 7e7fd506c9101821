"""The go/no-go summary of a stack: what it asks for, what its runs take, and what that costs
on demand, decided once here and exported (stack output `summary`) for `make render` to print.

Costs are estimates from facts.pricing, for on-demand capacity only; Spot, reservations and the
Dynamic Workload Scheduler are priced otherwise and say so, and whatever has no price is listed
under `notPriced`, never guessed. A run's duration is known only where its plan
(planners.nemo.RunPlan) has a published step time at exactly the run's layout
(facts.models.StepTime); its checkpoints are priced as its plan has them (planners.checkpoints).

The verdict is NO-GO when `up` is bound to fail on a value the user has still to give: the
project or a pool's reservation left as the shipped files' placeholder. Whatever else the
program can tell is wrong (a run no pool can admit, a bad value) stops it before the summary
exists; its warnings are advice and leave the verdict GO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from facts import pricing
from facts.gke import CapacityType
from facts.kueue import MULTIKUEUE_DISPATCH_ROUND_SECONDS, Dispatch
from facts.project import PROJECT, is_placeholder
from facts.registries import RegistryMirror
from planners.layout import planned_layout
from planners.multikueue import Worker, worker_pools
from planners.nemo import RunPlan
from planners.pools import GpuPoolExport
from planners.runs import RunSpec
from planners.startup import first_step
from planners.teams import Team


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
class ChainLink:
    """One pool of a run's capacity chain (planners.chains): what the run's nodes cost an hour
    there and the run in all if it lands there (None: not priced), and what is known of the wait."""

    pool: str
    capacity: str
    usd_per_hour: float | None
    usd: float | None
    wait: str
    # A MultiKueue manager's run: the worker whose pool it is.
    worker: str | None = None


# What is known of the wait for a pool's nodes, by capacity mode.
_WAIT: Mapping[CapacityType, str] = {
    CapacityType.ON_DEMAND: "none known: on-demand VMs, where the zone has them",
    CapacityType.RESERVATION: "none while the reservation has room",
    CapacityType.SPOT: "none known, and preemptible: Spot VMs may be reclaimed at any time",
    CapacityType.FLEX_START: "until the Dynamic Workload Scheduler provisions the nodes (no bound published)",
    CapacityType.QUEUED_PROVISIONING: "until the Dynamic Workload Scheduler provisions all nodes at once",
}


@dataclass(frozen=True)
class CpuPool:
    """A CPU node pool of the stack (the system pool, the supervisor's)."""

    name: str
    machine_type: str
    # Nodes in the whole cluster.
    nodes: int


@dataclass(frozen=True)
class Filestore:
    tier: str
    capacity_gib: int


@dataclass(frozen=True)
class CpuPoolLine:
    name: str
    machine_type: str
    nodes: int
    usd_per_hour: float | None
    pricing: str


@dataclass(frozen=True)
class FilestoreLine:
    tier: str
    capacity_gib: int
    usd_per_hour: float | None
    pricing: str


@dataclass(frozen=True)
class RunLine:
    name: str
    model: str
    pool: str
    # What the run trains with: its runtime (Framework.label) and image.
    runtime: str
    image: str
    nodes: int
    gpus: int
    steps: int
    # Restarts after a failure other than a program error before the run fails (docs/recovery.md).
    max_restarts: int
    step_time_s: float | None
    step_time_source: str | None
    # What the published measurement used that the run does not (StepTime.measured_with).
    step_time_measured_with: str | None
    # Its checkpoints (planners.checkpoints): saves, one save's write to the bucket, whether
    # training goes on during it, and the seconds its steps wait for them in all (None: unknown).
    checkpoint_saves: int
    checkpoint_write_s: float | None
    checkpoint_async: bool | None
    checkpoint_wait_s: float | None
    # Its steps and the waits for its checkpoints.
    hours: float | None
    usd: float | None
    # Predicted time to the end of the first step (planners.startup): the sum of the terms with a
    # public figure, a lower bound; what those seconds of the run's nodes cost on demand.
    first_step_s: float = 0.0
    first_step_terms: tuple[str, ...] = ()
    first_step_usd: float | None = None
    # The step time is the layout planner's prediction (planners.layout): none is published at
    # the run's layout.
    step_time_predicted: bool = False
    # The layout the planner chose for a run that leaves it to it (`layout: auto`), as the
    # planner writes a layout: `TP2 PP8 VP10 MBS1`.
    planned_layout: str | None = None
    # Its capacity chain, where it names more than one pool, in the order Kueue tries them; a
    # MultiKueue manager's run: its workers that have its pool, offered it as `dispatch` says.
    chain: tuple[ChainLink, ...] | None = None
    dispatch: Dispatch | None = None


@dataclass(frozen=True)
class TeamLine:
    """A team's guarantee (planners.teams) and what its guaranteed nodes cost on demand: the
    platform's chargeback basis, whether the team uses them or lends them."""

    name: str
    namespace: str
    # "<pool> <nodes> nodes (<gpus> GPUs)" per pool of its quota.
    shares: tuple[str, ...]
    weight: str
    usd_per_hour: float | None


@dataclass(frozen=True)
class SpareLine:
    """A pool's nodes beyond the largest run of the stack on it: when a node of a run fails, Kueue
    replaces it in the run's placement with a free node of its topology domain
    (TASFailedNodeReplacement, docs/recovery.md), so the run restarts without waiting for capacity.
    A pool of fixed size holds them standing, at its per-node price; an autoscaled one creates them
    when asked, at no cost until then."""

    pool: str
    nodes: int
    standing: bool
    usd_per_hour: float | None
    pricing: str


@dataclass(frozen=True)
class Summary:
    project: str
    region: str
    zone: str
    pools: tuple[PoolLine, ...]
    runs: tuple[RunLine, ...]
    price_source: str
    cpu_pools: tuple[CpuPoolLine, ...] = ()
    filestore: FilestoreLine | None = None
    # Every item without a price, and why; then what no estimate includes.
    not_priced: tuple[str, ...] = ()
    # Why `up` would fail; empty: GO.
    no_go: tuple[str, ...] = ()
    teams: tuple[TeamLine, ...] = ()
    spares: tuple[SpareLine, ...] = ()

    @property
    def usd_per_hour(self) -> float | None:
        """Every priced pool at its maximum size, and Filestore; None when nothing is priced."""
        hourly = [p.usd_per_hour for p in self.pools] + [p.usd_per_hour for p in self.cpu_pools]
        if self.filestore is not None:
            hourly.append(self.filestore.usd_per_hour)
        priced = [usd for usd in hourly if usd is not None]
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
    CapacityType.SPOT: "Spot VMs: a fraction of on demand, and preemptible",
    CapacityType.RESERVATION: "paid under the reservation",
    CapacityType.FLEX_START: "flex-start VMs, at Dynamic Workload Scheduler prices",
    CapacityType.QUEUED_PROVISIONING: "queued provisioning, at Dynamic Workload Scheduler prices",
}


def _pool_line(pool: GpuPoolExport, region: str) -> PoolLine:
    price = pricing.on_demand_usd_per_hour(pool.machine_type, region)
    if pool.node_labels is not None:
        note, total = "an existing cluster's nodes: not priced", None
    elif pool.booked_from is not None:
        note = (
            f"booked in calendar mode from {pool.booked_from} to {pool.booked_until}, billed for the whole period, "
            f"used or not: {pool.booked_vm_hours:,} VM-hours at Dynamic Workload Scheduler prices"
        )
        total = None
    elif pool.capacity_type is not CapacityType.ON_DEMAND:
        note, total = _NOT_ON_DEMAND[pool.capacity_type], None
    elif price is None:
        note, total = _no_price(pool.machine_type, region), None
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


def _link(
    run: RunSpec, pool: GpuPoolExport, region: str, hours: float | None, *, wait: str, worker: str | None = None
) -> ChainLink:
    """The run on `pool` in `region` (empty: not known): its nodes' price an hour on demand, and
    the whole run's where its duration is known."""
    price = pricing.on_demand_usd_per_hour(pool.machine_type, region) if region else None
    per_hour = price * run.nodes if price is not None and pool.capacity_type is CapacityType.ON_DEMAND else None
    usd = per_hour * hours if per_hour is not None and hours is not None else None
    return ChainLink(pool.name, pool.capacity_type.value, per_hour, usd, wait, worker=worker)


def _chain(
    run: RunSpec, hours: float | None, pools: Mapping[str, tuple[GpuPoolExport, str]]
) -> tuple[ChainLink, ...] | None:
    if not run.fallback_pools:
        return None
    return tuple(_link(run, *pools[name], hours, wait=_chain_wait(run, pools[name][0])) for name in run.chain)


def _chain_wait(run: RunSpec, pool: GpuPoolExport) -> str:
    """What is known of the wait on a pool of a run's chain (or a manager's worker's), and on Spot,
    what a reclaim costs the run: one JobSet restart (the lane: tests/integration/
    test_lane_chains.py, the reclaim as GKE does it; docs/capacity.md) and the steps since its
    newest checkpoint, or all of them for a run that does not resume."""
    wait = _WAIT[pool.capacity_type]
    if pool.booked_from is not None:
        return (
            f"{wait}, within its booking only ({pool.booked_from} to {pool.booked_until}): Kueue admits runs there "
            "from the first `up` of the platform on or after its start to the first after its end"
        )
    if pool.capacity_type is not CapacityType.SPOT:
        return wait
    if not run.max_restarts:
        return f"{wait}; a reclaim fails the run, which has no restarts (maxRestarts 0)"
    lost = "the steps since its checkpoint" if run.resume else "all its steps (resume: false)"
    return f"{wait}; each reclaim costs one of the run's {run.max_restarts} restarts and {lost}"


def _worker_chain(
    run: RunSpec, hours: float | None, workers: Sequence[Worker], dispatch: Dispatch
) -> tuple[ChainLink, ...] | None:
    """A manager's run on each worker that has its pool. In order, Kueue offers it to one more
    worker each round, whether that worker has the pool or not (facts.kueue), so a run whose
    pool only a later worker has waits for the rounds before it too."""
    links = []
    for i, worker in enumerate(workers):
        pool = next((p for p in worker.pools if p.name == run.pool), None)
        if pool is None:
            continue
        wait = _chain_wait(run, pool)
        if dispatch is Dispatch.IN_ORDER and i:
            after = i * MULTIKUEUE_DISPATCH_ROUND_SECONDS // 60
            wait = f"offered {after} min after the first worker, if none has admitted it by then; then {wait}"
        links.append(_link(run, pool, worker.region or "", hours, wait=wait, worker=worker.name))
    delayed = dispatch is Dispatch.IN_ORDER and bool(links) and links[0].worker != workers[0].name
    return tuple(links) if len(links) > 1 or delayed else None


def _run_line(
    plan: RunPlan,
    pools: Mapping[str, tuple[GpuPoolExport, str]],
    mirror: RegistryMirror | None,
    workers: Sequence[Worker] = (),
    dispatch: Dispatch = Dispatch.ALL_AT_ONCE,
) -> RunLine:
    """`pools`: each pool's export and region, by name (the run's, and its chain's); `workers`: a
    MultiKueue manager's, which offers the run to them as `dispatch` says."""
    run, s, known, saving = plan.run, plan.run.settings, plan.step, plan.checkpoints
    pool, region = pools[run.pool]
    seconds = plan.expected_step_seconds
    wait = saving.wait_s(seconds) if saving else 0.0
    hours = (s.steps * seconds + wait) / 3600 if seconds is not None and wait is not None else None
    price = pricing.on_demand_usd_per_hour(pool.machine_type, region)
    on_demand = pool.capacity_type is CapacityType.ON_DEMAND
    image = run.image_ref
    start = first_step(image, run.model, run.nodes, pool, mirror, node_checks=plan.node_checks)
    start_usd = start.known_seconds / 3600 * run.nodes * price if price is not None and on_demand else None
    return RunLine(
        name=run.name,
        model=run.model,
        pool=run.pool,
        runtime=run.recipe.framework.label,
        image=image,
        nodes=run.nodes,
        gpus=run.nodes * pool.machine.gpus,
        steps=s.steps,
        max_restarts=run.max_restarts,
        step_time_s=seconds,
        step_time_source=known.source if known else None,
        step_time_measured_with=known.measured_with if known else None,
        checkpoint_saves=saving.saves if saving else 0,
        checkpoint_write_s=saving.write_s if saving else None,
        checkpoint_async=saving.asynchronous if saving else None,
        checkpoint_wait_s=wait,
        hours=hours,
        usd=hours * run.nodes * price if hours is not None and price is not None and on_demand else None,
        first_step_s=start.known_seconds,
        first_step_terms=tuple(
            f"{t.name}: {'not predicted' if t.seconds is None else f'{t.seconds:.0f} s'} ({t.how})" for t in start.terms
        ),
        first_step_usd=start_usd,
        chain=_worker_chain(run, hours, workers, dispatch) if workers else _chain(run, hours, pools),
        dispatch=dispatch if workers else None,
        step_time_predicted=known is None and seconds is not None,
        planned_layout=planned_layout(run) if run.planned_layout else None,
    )


def _team_line(team: Team, pools: Mapping[str, PoolLine]) -> TeamLine:
    costs = []
    for quota in team.quotas:
        pool = pools[quota.pool]
        per_node = pool.usd_per_hour / pool.nodes if pool.usd_per_hour is not None and pool.nodes else None
        costs.append(None if per_node is None else per_node * quota.nodes)
    priced = [c for c in costs if c is not None]
    return TeamLine(
        name=team.name,
        namespace=team.namespace,
        shares=tuple(
            f"{q.pool} {q.nodes} nodes ({q.nodes * pools[q.pool].gpus // max(pools[q.pool].nodes, 1)} GPUs)"
            for q in team.quotas
        ),
        weight=team.weight,
        usd_per_hour=sum(priced) if priced and len(priced) == len(costs) else None,
    )


def _cpu_pool_line(pool: CpuPool, region: str) -> CpuPoolLine:
    price = pricing.on_demand_usd_per_hour(pool.machine_type, region)
    if price is None:
        return CpuPoolLine(pool.name, pool.machine_type, pool.nodes, None, _no_price(pool.machine_type, region))
    note = f"estimate: {price:.4f} USD per node-hour on demand"
    return CpuPoolLine(pool.name, pool.machine_type, pool.nodes, price * pool.nodes, note)


def _filestore_line(filestore: Filestore, region: str) -> FilestoreLine:
    price = pricing.filestore_usd_per_gib_hour(filestore.tier, region)
    if price is None:
        return FilestoreLine(
            filestore.tier, filestore.capacity_gib, None, _no_price(f"Filestore {filestore.tier}", region)
        )
    note = f"estimate: {price:g} USD per provisioned GiB-hour, {pricing.FILESTORE_SOURCE}"
    return FilestoreLine(filestore.tier, filestore.capacity_gib, price * filestore.capacity_gib, note)


def _no_price(item: str, region: str) -> str:
    return f"no price for {item} in {region} in the table"


def _not_priced(summary: Summary) -> tuple[str, ...]:
    lines = [f"pool {p.name}: {p.pricing}" for p in summary.pools if p.usd_per_hour is None]
    lines += [f"pool {p.name}: {p.pricing}" for p in summary.cpu_pools if p.usd_per_hour is None]
    if summary.filestore is not None and summary.filestore.usd_per_hour is None:
        lines.append(f"Filestore: {summary.filestore.pricing}")
    for run in summary.runs:
        if run.hours is None:
            lines.append(f"run {run.name}: no published or predicted step time, so no duration")
        elif run.usd is None:
            lines.append(f"run {run.name}: its pool {run.pool} is not priced")
    return (*lines, *pricing.NEVER_PRICED)


def _spare_lines(
    pools: Sequence[GpuPoolExport], runs: Sequence[RunSpec], pool_lines: Mapping[str, PoolLine]
) -> tuple[SpareLine, ...]:
    """The spares of each pool the stack's runs use, priced as the pool's line prices its nodes."""
    lines = []
    for pool in pools:
        largest = max((run.nodes for run in runs if run.pool == pool.name), default=None)
        if largest is None:
            continue
        spare = pool.max_nodes - largest
        standing = pool.min_nodes == pool.max_nodes
        line = pool_lines[pool.name]
        price = line.usd_per_hour / pool.max_nodes if line.usd_per_hour is not None else None
        usd: float | None
        if spare == 0:
            note, usd = "none: a run that loses a node waits for its replacement", 0.0
        elif not standing:
            note, usd = "the pool scales up to them when a node fails: no cost until then", 0.0
        else:
            note, usd = line.pricing, (price * spare if price is not None else None)
        lines.append(SpareLine(pool.name, spare, standing, usd, note))
    return tuple(lines)


def _no_go(project: str, pools: Sequence[GpuPoolExport]) -> tuple[str, ...]:
    reasons = []
    if is_placeholder(project):
        reasons.append(f"{PROJECT}:project {project!r} is the shipped files' placeholder")
    reasons += [
        f"pool {p.name}: reservation {p.reservation!r} is the example's placeholder"
        for p in pools
        if p.reservation is not None and is_placeholder(p.reservation)
    ]
    return tuple(reasons)


def plan_summary(
    project: str,
    region: str,
    zone: str,
    pools: Sequence[GpuPoolExport],
    plans: Sequence[RunPlan],
    *,
    cpu_pools: Sequence[CpuPool] = (),
    filestore: Filestore | None = None,
    teams: Sequence[Team] = (),
    workers: Sequence[Worker] = (),
    dispatch: Dispatch = Dispatch.ALL_AT_ONCE,
    mirror: RegistryMirror | None = None,
) -> Summary:
    """`workers`: a MultiKueue manager's, where its runs run instead of on `pools`, offered to them
    as `dispatch` says; each run is priced on the first worker that has its pool."""
    where = worker_pools(workers) if workers else {p.name: (p, region) for p in pools}
    pool_lines = {pool.name: _pool_line(pool, region) for pool in pools}
    summary = Summary(
        project=project,
        region=region,
        zone=zone,
        pools=tuple(pool_lines.values()),
        runs=tuple(_run_line(plan, where, mirror, workers, dispatch) for plan in plans),
        price_source=pricing.SOURCE,
        cpu_pools=tuple(_cpu_pool_line(pool, region) for pool in cpu_pools),
        filestore=_filestore_line(filestore, region) if filestore is not None else None,
        no_go=_no_go(project, pools),
        teams=tuple(_team_line(team, pool_lines) for team in teams),
        # A manager's runs are its workers': their spares are the workers' to show.
        spares=_spare_lines(pools, [plan.run for plan in plans], pool_lines) if not workers else (),
    )
    return replace(summary, not_priced=_not_priced(summary))
