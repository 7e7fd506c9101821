"""Training layer: the stack's pretraining runs (one JobSet each) and data-preparation Jobs.

Runs are checked against the platform's facts (pools, quotas, topology, priorities) before
anything is created, whether those facts come from this stack's config or from an upstream stack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import pulumi

from components.fabric import CONTAINER as FABRIC_CONTAINER
from components.fabric import FabricCheck, FabricCheckArgs
from components.training import DataPreparation, DataPreparationArgs, TrainingRun, TrainingRunArgs, Volumes
from config.base import Model, to_snake
from config.loader import ConfigError
from config.stack import StackConfig
from config.training import DataPrepConfig, NcclTestConfig, RunConfig, TokenizerConfig
from facts import versions
from facts.errors import RuleError
from facts.kubernetes import (
    COMPLETION_INDEX_LABEL,
    FABRIC_CHECK_LABEL,
    FABRIC_CHECK_PRIORITY,
    JOBSET_API,
    RUN_LABEL,
    TRAINING_CONTAINER,
    looks_secret,
    revisioned,
)
from facts.kueue import WithinClusterQueue
from facts.machines import MachineType
from facts.models import RunSettings
from facts.project import PROJECT
from facts.versions import Image
from planners import layout, nemo, workload
from planners.chains import chain_advice, check_chain
from planners.fabric import NcclTestSpec, check_nccl_test
from planners.gpudirect import PodNetworking, gpudirect_stack, node_checks, pod_networking
from planners.multikueue import Worker
from planners.ownership import ObjectRef
from planners.runs import (
    DataPrepSpec,
    ProfileWindow,
    Resiliency,
    RunSpec,
    Tokenizer,
    check_data_prep,
    check_run,
    max_restarts,
)
from planners.runtimes import check_overrides
from planners.runtimes.bridge import check_stragglers
from planners.startup import preload_advice
from planners.submitted import PlannedFor, RunStep, Submitted, check_unrecorded, encoded, step_of
from stacks.cluster import ClusterOutputs
from stacks.contract import ClusterExports, PlatformExports
from stacks.platform import PlatformOutputs

# The training layer's component, whose runs are `<LAYER>-<run>` (stacks.recorded reads them back).
LAYER = "training"


@dataclass(frozen=True)
class Place:
    """Where a run, data-preparation job or fabric check goes: the platform's namespace and queue,
    or its team's (planners.teams), with the team's folder of the shared file system."""

    namespace: str
    local_queue: str
    experiments_dir: str


def place_of(team: str | None, platform: PlatformExports) -> Place:
    """The place of a job whose team passed check_team."""
    if team is None:
        return Place(platform.namespace, platform.local_queue, platform.experiments_dir)
    found = platform.teams_by_name[team]
    return Place(found.namespace, found.local_queue, f"{platform.experiments_dir}/{found.name}")


def default_pool(team: str | None, platform: PlatformExports) -> str:
    """The first pool of the job's team, or of the platform."""
    found = platform.teams_by_name.get(team or "")
    return found.pools[0] if found else platform.flavors[0].pool


def check_team(team: str | None, pool: str, platform: PlatformExports, priority: str | None = None) -> None:
    """A job names its team exactly where the platform has teams, and stays on its team's pools and
    priorities. Keys are relative to the job."""
    names = [t.name for t in platform.teams]
    if not names:
        if team is not None:
            raise RuleError("team", team, "names a team, and the platform has none (its stack sets no teams)")
        return
    if team is None:
        raise RuleError("team", None, f"is required: the platform's pools are shared by teams ({', '.join(names)})")
    found = platform.teams_by_name.get(team)
    if found is None:
        raise RuleError("team", team, f"is not a team of the platform ({', '.join(names)})")
    if pool not in found.pools:
        raise RuleError(
            "pool", pool, f"is not a pool of team {team}'s quota ({', '.join(found.pools)}): a team runs on those only"
        )
    if priority is not None and priority not in found.priorities:
        raise RuleError("priority", priority, f"is not one team {team} may use ({', '.join(found.priorities)})")


def _tokenizer(cfg: TokenizerConfig) -> Tokenizer:
    return Tokenizer(library=cfg.library, type=cfg.type, model=cfg.model)


def run_spec(run: RunConfig, platform: PlatformExports, submitted: Submitted | None = None) -> RunSpec:
    """A run of the config, on the platform's default pool and priority unless it names its own.
    A supervised run defaults to the image that holds the resiliency launcher. A run that leaves
    its layout to the planner keeps the one `submitted` (what the state records of it) holds while
    its revision stands."""
    r = run.resiliency
    pool = run.pool or default_pool(run.team, platform)
    flavor = platform.flavors_by_pool.get(pool)
    machine_type = flavor.machine.name if flavor else None
    settings = run.settings_on(machine_type)
    image = run.image or (versions.RESILIENCY.ref if r.supervisor else None)
    if run.layout == "auto" and flavor is not None:
        kept = _kept_layout(run, submitted, flavor.machine.name, settings)
        settings = layout.planned_settings(run.model, flavor.machine, run.nodes, settings, kept, image=image)
    return RunSpec(
        name=run.name,
        model=run.model,
        pool=pool,
        fallback_pools=tuple(run.fallback_pools),
        planned_layout=run.layout == "auto",
        nodes=run.nodes,
        settings=settings,
        machine_type=machine_type,
        tokenizer=_tokenizer(run.tokenizer),
        priority=run.priority.value if run.priority else _default_priority(run.team, platform),
        dataset_prefix=run.dataset.prefix,
        copy_dataset_to_local_ssd=run.dataset.copy_to_local_ssd,
        checkpoint=run.checkpoint.enabled,
        checkpoint_interval_steps=run.checkpoint.interval_for(settings.steps),
        resume=run.checkpoint.resume,
        profile=ProfileWindow(run.profile.start_step, run.profile.end_step) if run.profile else None,
        stragglers=run.stragglers,
        max_restarts=max_restarts(run.max_restarts, run.checkpoint.enabled, run.checkpoint.resume, r.supervisor),
        resiliency=Resiliency(
            supervisor=r.supervisor,
            fault_tolerance=r.heartbeats,
            in_job_restarts=r.in_job_restarts,
            workload_restarts=r.workload_restarts,
            initial_heartbeat_timeout_seconds=r.initial_heartbeat_timeout_seconds,
            heartbeat_timeout_seconds=r.heartbeat_timeout_seconds,
            async_checkpoint=r.async_checkpoint,
            local_checkpoint_interval_steps=r.local_checkpoint_interval_steps,
        ),
        topology_mode=run.topology.mode,
        topology_level=run.topology.level,
        image=image,
        overrides=MappingProxyType(dict(run.overrides)),
        env=MappingProxyType(dict(run.env)),
        allow_env_overrides=frozenset(run.allow_env_overrides),
        given=frozenset(type(run).model_fields[key].alias or key for key in run.model_fields_set),
        revision=run.revision,
        definition=encoded(run.definition()),
    )


def _kept_layout(
    run: RunConfig, submitted: Submitted | None, machine: str, settings: RunSettings
) -> Mapping[str, Any] | None:
    """The layout a run that leaves it to the planner was submitted with, while its revision and
    what the layout was planned for (the machine, nodes, batch, sequence and precision, as its
    plan recorded them) stand. Else it is planned again: a changed key at the same revision is
    then refused by planners.submitted, and a raised revision takes the new plan."""
    if submitted is None or submitted.revision != run.revision or submitted.layout is None:
        return None
    now = PlannedFor(machine, run.nodes, settings.global_batch_size, settings.sequence_length, settings.fp8)
    return submitted.layout if submitted.planned_for == now else None


def _default_priority(team: str | None, platform: PlatformExports) -> str:
    """The platform's default, or the first its team may use where that is not one of them."""
    found = platform.teams_by_name.get(team or "")
    if found is None or platform.default_priority_class in found.priorities:
        return platform.default_priority_class
    return found.priorities[0]


def unrecorded_jobsets(
    cfg: StackConfig, platform: PlatformExports, submitted: Mapping[str, Submitted]
) -> dict[str, list[ObjectRef]]:
    """By run name, the JobSets an interrupted `up` may have left of each run whose JobSet the state
    does not hold: the one of its revision now, and the one of the revision the state records."""
    found: dict[str, list[ObjectRef]] = {}
    for run in cfg.training.runs:
        recorded = submitted.get(run.name)
        if recorded is not None and recorded.jobset_recorded:
            continue
        revisions = {run.revision, *([recorded.revision] if recorded and recorded.revision else [])}
        namespace = place_of(run.team, platform).namespace
        found[run.name] = [
            ObjectRef(JOBSET_API, "JobSet", namespace, revisioned(run.name, revision)) for revision in sorted(revisions)
        ]
    return found


def run_site(cluster: ClusterExports, platform: PlatformExports, pool: str) -> ClusterExports | Worker:
    """The cluster whose GPU wiring a run's pods use: this one, or on a MultiKueue manager the first
    worker that has the pool (check_dispatched holds the others to the same)."""
    return next((w for w in platform.workers if w.flavor(pool) is not None), cluster)


def check_dispatched(run: RunSpec, run_config: RunConfig, platform: PlatformExports, secret_env: bool) -> None:
    """A run a MultiKueue manager dispatches runs on one worker, whichever admits it: it fits one
    worker's pool, its pods are wired alike on every worker that has the pool, and it needs nothing
    MultiKueue does not copy (only the JobSet travels: components.training, TrainingRunArgs)."""
    holders = {w.name: (w, flavor) for w in platform.workers if (flavor := w.flavor(run.pool)) is not None}
    if run.nodes > max(flavor.nodes for _, flavor in holders.values()):
        where = ", ".join(f"{name} {flavor.nodes}" for name, (_, flavor) in holders.items())
        raise RuleError("nodes", run.nodes, f"exceeds every worker's pool {run.pool} ({where}): a run runs on one")
    machine = platform.flavors_by_pool[run.pool].machine
    if machine.nvlink_across_nodes:
        why = "has NVLink domains: a run there needs a ComputeDomain on its worker, which MultiKueue does not copy"
        raise RuleError("pool", run.pool, why + "; submit it in the worker's stack")
    if secret_env and run.env:
        why = "is kept in a Secret, which MultiKueue does not copy to the worker: set it in plain text or on the worker"
        raise RuleError("env", sorted(run.env), why)
    if run_config.fabric_check:
        why = "gates the run on a check of one cluster's fabric; a manager's run may land on any worker"
        raise RuleError("fabricCheck", run_config.fabric_check, why)
    wiring = {name: run_networking(run, machine, worker) for name, (worker, _) in holders.items()}
    first = next(iter(wiring))
    for name, networking in wiring.items():
        if networking != wiring[first]:
            why = f"is wired unlike on worker {first} on worker {name} (its GPU networks differ): a run runs on either"
            raise RuleError("pool", run.pool, why)


def run_networking(run: RunSpec, machine: MachineType, cluster: ClusterExports | Worker) -> PodNetworking:
    """The pool's pod networking; on the host network for a supervised run."""
    return pod_networking(
        gpudirect_stack(machine, cluster.gke),
        cluster.gpu_networks,
        machine.gpus,
        run.resiliency.supervisor,
        machine.pod_gib_for(run.image_ref),
    )


def check_gib(machine: MachineType, images: set[str], check: str, resource: pulumi.Resource) -> Image | None:
    """The gIB a fabric check installs: the one the runs it gates load (their images' pin), so it
    tests the NCCL they train with; the machine's current runtime's without such runs. Runs of
    differently pinned images behind one check are told which release it tests."""
    pins = {machine.pod_gib_for(image) for image in images}
    if len(pins) == 1:
        return pins.pop()
    gib = machine.pod_gib_for(None)
    if len(pins) > 1 and gib is not None:
        loaded = ", ".join(sorted(p.ref for p in pins if p is not None))
        pulumi.log.warn(
            f"fabric check {check}: the runs it gates load different gIB releases ({loaded}); it tests {gib.ref}: "
            "give each release its own check",
            resource=resource,
        )
    return gib


def run_paths(run: RunSpec, platform: PlatformExports, place: Place) -> workload.RunPaths:
    return workload.run_paths(run, place.experiments_dir, platform.checkpoint_mount, platform.data_mount, platform.gke)


def data_prep_spec(job: DataPrepConfig, platform: PlatformExports) -> DataPrepSpec:
    return DataPrepSpec(
        name=job.name,
        input=job.input,
        output_prefix=job.output_prefix,
        json_key=job.json_key,
        tokenizer=_tokenizer(job.tokenizer),
        workers=job.workers,
        pool=job.pool or default_pool(job.team, platform),
    )


def nccl_test_spec(test: NcclTestConfig, platform: PlatformExports) -> NcclTestSpec:
    return NcclTestSpec(
        name=test.name,
        pool=test.pool or default_pool(test.team, platform),
        nodes=test.nodes,
        collectives=tuple(test.collectives),
        timeout_minutes=test.timeout_minutes,
    )


@dataclass(frozen=True)
class CheckedRuns:
    """What check_runs found, by run name, in the order of the stack's runs: each run's plan, and
    what `up` does to it (a run absent from `steps` is submitted)."""

    plans: Mapping[str, nemo.RunPlan] = field(default_factory=lambda: MappingProxyType({}))
    steps: Mapping[str, RunStep] = field(default_factory=lambda: MappingProxyType({}))


def check_runs(
    cfg: StackConfig,
    cluster: ClusterExports,
    platform: PlatformExports,
    secret_env: bool = False,
    *,
    submitted: Mapping[str, Submitted] = MappingProxyType({}),
    unrecorded: Mapping[str, Submitted] = MappingProxyType({}),
) -> CheckedRuns:
    """Every run and data-prep job against the environment it targets, every submitted run
    (`submitted`, by run name: stacks.recorded) against what it was submitted with, and every
    run's JobSet that an interrupted `up` left on an existing cluster and the state does not hold
    (`unrecorded`: stacks.ownership.unrecorded_runs) against the run; called before anything is
    registered. Raises ConfigError naming every bad key; else each run's plan and what `up` does
    to it. `secret_env`: the stack's `training` holds encrypted values, so the runs' `env` goes
    into Secrets."""
    flavors = platform.flavors_by_pool
    errors: list[RuleError] = []
    plans: dict[str, nemo.RunPlan] = {}
    steps: dict[str, RunStep] = {}
    for i, run_config in enumerate(cfg.training.runs):
        if not secret_env:
            errors.extend(
                RuleError(
                    f"training.runs[{i}].env.{name}",
                    None,
                    f"looks like a credential and is plain text: store it encrypted, `pulumi config set --secret "
                    f"--path '{PROJECT}:training.runs[{i}].env.{name}' <value>`",
                )
                for name in run_config.env
                if looks_secret(name)
            )
        if run_config.fabric_check and platform.preemption is WithinClusterQueue.NEVER:
            why = (
                "cannot preempt this run once it holds the pool (kueue.preemption is Never): a changed check would "
                "wait its whole timeout behind the run it gates; set kueue.preemption to LowerPriority"
            )
            errors.append(RuleError(f"training.runs[{i}].fabricCheck", run_config.fabric_check, why))
        try:
            run = run_spec(run_config, platform, submitted.get(run_config.name))
            check_team(run_config.team, run.pool, platform, run.priority)
            check_overrides(run)
            check_run(run, flavors, platform.priority_classes, platform.supervisor, platform.gke)
            check_stragglers(run)
            team = platform.teams_by_name.get(run_config.team) if run_config.team else None
            check_chain(
                run,
                flavors,
                team.pools if team else [f.pool for f in platform.flavors],
                {p.name: p.capacity_type for p in cluster.gpu_pools},
                team=run_config.team,
                dispatched=bool(platform.workers),
            )
            for link in run.fallback_pools:
                check_run(
                    replace(run, pool=link), flavors, platform.priority_classes, platform.supervisor, platform.gke
                )
            machine = flavors[run.pool].machine
            if platform.workers:
                check_dispatched(run, run_config, platform, secret_env)
            networking = run_networking(run, machine, run_site(cluster, platform, run.pool))
            paths = run_paths(run, platform, place_of(run_config.team, platform))
            plans[run.name] = nemo.plan_run(run, machine, networking, paths, platform.preflight_checks)
            definition = json.loads(run.definition)
            steps[run.name] = step_of(run.name, run.revision, definition, submitted.get(run.name), secret_env)
            if run.name in unrecorded:
                jobset = revisioned(run.name, run.revision)
                check_unrecorded(
                    run.name, run.revision, jobset, definition, unrecorded[run.name], secret_env=secret_env
                )
        except RuleError as error:
            errors.append(_as_written(error, run_config).under(f"training.runs[{i}]"))
    on_workers = "belongs in a worker's stack: a MultiKueue manager dispatches runs only, and each worker {}"
    for i, job in enumerate(cfg.training.data_prep):
        if platform.workers:
            errors.append(RuleError(f"training.dataPrep[{i}]", job.name, on_workers.format("prepares its own bucket")))
            continue
        try:
            spec = data_prep_spec(job, platform)
            check_team(job.team, spec.pool, platform)
            folder = f"{job.team}/"
            if job.team is not None and platform.gke and not job.output_prefix.startswith(folder):
                why = (
                    f"must start with {folder}: team {job.team}'s data preparation writes only its folder of the bucket"
                )
                raise RuleError("outputPrefix", job.output_prefix, why)
            check_data_prep(spec, flavors)
        except RuleError as error:
            errors.append(error.under(f"training.dataPrep[{i}]"))
    for i, test in enumerate(cfg.training.nccl_tests):
        if platform.workers:
            errors.append(RuleError(f"training.ncclTests[{i}]", test.name, on_workers.format("tests its own fabric")))
            continue
        try:
            test_spec = nccl_test_spec(test, platform)
            check_team(test.team, test_spec.pool, platform)
            check_nccl_test(test_spec, flavors)
        except RuleError as error:
            errors.append(error.under(f"training.ncclTests[{i}]"))
    if errors:
        raise ConfigError.of(errors)
    return CheckedRuns(plans=MappingProxyType(plans), steps=MappingProxyType(steps))


def _as_written(error: RuleError, run: RunConfig) -> RuleError:
    """A rule that names a whole part of the run (`resiliency`, `profile`) shows that part as the
    stack file wrote it."""
    if error.value is not None:
        return error
    part = getattr(run, to_snake(error.key), None) if "." not in error.key else None
    if not isinstance(part, Model):
        return error
    return RuleError(error.key, part.model_dump(by_alias=True, exclude_unset=True, mode="json"), str(error))


@dataclass(frozen=True)
class TrainingLayerArgs:
    config: StackConfig
    cluster: ClusterOutputs
    platform: PlatformOutputs
    # Each run's plan and what `up` does to it, as check_runs found them.
    checked: CheckedRuns
    # The stack's `training` holds encrypted values: every run's `env` goes into a Secret.
    secret_env: bool = False
    # What the state records of the runs the stack has submitted (stacks.recorded).
    submitted: Mapping[str, Submitted] = field(default_factory=lambda: MappingProxyType({}))


class TrainingLayer(pulumi.ComponentResource):
    TYPE = "nemo:training:TrainingLayer"

    runs: list[TrainingRun]
    data_prep: list[DataPreparation]
    checks: list[FabricCheck]

    def __init__(self, name: str, args: TrainingLayerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        cfg, cluster, platform = args.config, args.cluster, args.platform.facts
        child = pulumi.ResourceOptions(parent=self)
        flavors = platform.flavors_by_pool
        # A manager's pools are its workers' (none of them preloads for it).
        pools = {} if platform.workers else {p.name: p for p in cluster.facts.gpu_pools}
        volumes = Volumes(
            shared_claim=platform.shared_claim,
            shared_mount=platform.shared_mount,
            data_claim=platform.data_claim,
            data_mount=platform.data_mount,
            checkpoint_claim=platform.checkpoint_claim,
            checkpoint_mount=platform.checkpoint_mount,
            gke=platform.gke,
            cloud_storage_fuse=platform.cloud_storage_fuse,
        )
        after = args.platform.run_dependencies
        required = {run.fabric_check for run in cfg.training.runs if run.fabric_check}
        plans = args.checked.plans
        specs = [plans[run_config.name].run for run_config in cfg.training.runs]
        # The images of the runs each check gates: the check installs the gIB they load.
        gated: dict[str, set[str]] = {}
        for run_config, run in zip(cfg.training.runs, specs, strict=True):
            if run_config.fabric_check:
                gated.setdefault(run_config.fabric_check, set()).add(run.image_ref)
        self.checks = []
        for test_config in cfg.training.nccl_tests:
            test = nccl_test_spec(test_config, platform)
            place = place_of(test_config.team, platform)
            machine = flavors[test.pool].machine
            gib = check_gib(machine, gated.get(test.name, set()), test.name, self)
            networking = pod_networking(
                gpudirect_stack(machine, cluster.facts.gke), cluster.facts.gpu_networks, machine.gpus, gib=gib
            )
            at_start, left_out = node_checks(platform.preflight_checks, networking)
            if left_out:
                pulumi.log.warn(f"fabric check {test.name} on {machine.name}: {left_out}", resource=self)
            self.checks.append(
                FabricCheck(
                    f"{name}-{test.name}",
                    FabricCheckArgs(
                        test=test,
                        flavor=flavors[test.pool],
                        namespace=place.namespace,
                        local_queue=place.local_queue,
                        # Above every run (facts.kubernetes); an older platform has no such class.
                        priority=(
                            FABRIC_CHECK_PRIORITY
                            if FABRIC_CHECK_PRIORITY in platform.priority_classes
                            else platform.default_priority_class
                        ),
                        service_account=platform.service_account,
                        networking=networking,
                        shared_claim=platform.shared_claim,
                        shared_mount=platform.shared_mount,
                        results_dir=f"{place.experiments_dir}/{test.name}/nccl",
                        awaited=test.name in required,
                        after=after,
                        node_checks=at_start,
                    ),
                    opts=child,
                )
            )
        checks = {check.test_name: check for check in self.checks}
        self.runs = []
        for run_config, run in zip(cfg.training.runs, specs, strict=True):
            place = place_of(run_config.team, platform)
            gate = [checks[run_config.fabric_check].jobset] if run_config.fabric_check else []
            pool = pools.get(run.pool)
            advice = preload_advice(run.name, run.image_ref, pool) if pool else None
            if advice:
                pulumi.log.warn(advice, resource=self)
            for line in chain_advice(run, pools, flavors):
                pulumi.log.warn(line, resource=self)
            self.runs.append(
                TrainingRun(
                    f"{name}-{run.name}",
                    TrainingRunArgs(
                        plan=plans[run.name],
                        flavor=flavors[run.pool],
                        fallback=tuple(flavors[pool] for pool in run.fallback_pools),
                        namespace=place.namespace,
                        local_queue=place.local_queue,
                        service_account=platform.service_account,
                        volumes=volumes,
                        after=[*after, *gate],
                        secret_env=args.secret_env,
                        dispatched=bool(platform.workers),
                        mirror=None if platform.workers else cluster.facts.image_mirror,
                        submitted=args.submitted.get(run.name),
                        step=args.checked.steps.get(run.name, RunStep.SUBMIT),
                    ),
                    opts=child,
                )
            )
        self.data_prep = []
        for job_config in cfg.training.data_prep:
            job = data_prep_spec(job_config, platform)
            place = place_of(job_config.team, platform)
            prep = DataPreparation(
                f"{name}-{job.name}",
                DataPreparationArgs(
                    job=job,
                    flavor=flavors[job.pool],
                    namespace=place.namespace,
                    local_queue=place.local_queue,
                    service_account=platform.data_prep_service_account,
                    volumes=volumes,
                    after=after,
                    mirror=cluster.facts.image_mirror,
                ),
                opts=child,
            )
            self.data_prep.append(prep)
        self.register_outputs({})


def build(
    cfg: StackConfig,
    cluster: ClusterOutputs,
    platform: PlatformOutputs,
    opts: pulumi.ResourceOptions,
    secret_env: bool = False,
    *,
    checked: CheckedRuns,
    submitted: Mapping[str, Submitted] = MappingProxyType({}),
) -> dict[str, Any]:
    layer = TrainingLayer(
        LAYER,
        TrainingLayerArgs(
            config=cfg,
            cluster=cluster,
            platform=platform,
            secret_env=secret_env,
            submitted=submitted,
            checked=checked,
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})),
    )
    used = (
        {r.namespace for r in layer.runs} | {c.namespace for c in layer.checks} | {p.namespace for p in layer.data_prep}
    )
    namespaces = sorted(used or {platform.facts.namespace})
    queue_scope = f"-n {namespaces[0]}" if len(namespaces) == 1 else "--all-namespaces"
    return {
        "training": {
            "runs": {
                run.run_name: {
                    "jobset": run.jobset_name,
                    "logDir": run.log_dir,
                    # The run label, not the JobSet: it follows every version of the run.
                    "follow": f"kubectl -n {run.namespace} logs -f -l {RUN_LABEL}={run.run_name} "
                    f"-c {TRAINING_CONTAINER} --max-log-requests 64",
                    "resubmit": run.resubmit,
                    # What it waits for, when it does not start (docs/waiting.md).
                    "waiting": f"python -m tools.waiting {run.run_name} -n {run.namespace}",
                    "plan": checked.plans[run.run_name].to_plain(),
                }
                for run in layer.runs
            },
            "dataPrep": {prep.spec_name: prep.job_name for prep in layer.data_prep},
            "ncclTests": {
                check.test_name: {
                    "jobset": check.jobset_name,
                    "logs": check.results_dir,
                    # Node 0's output, then the verdict against the published figures.
                    "check": f"kubectl -n {check.namespace} logs -l {FABRIC_CHECK_LABEL}={check.test_name},"
                    f"{COMPLETION_INDEX_LABEL}=0 -c {FABRIC_CONTAINER} --tail=-1 > nccl.log && "
                    f"python -m analysis nccl --log nccl.log --expect {check.flavour}",
                }
                for check in layer.checks
            },
            "queue": f"kubectl {queue_scope} get jobsets,workloads",
        }
    }
