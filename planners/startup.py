"""Time to a run's first training step, predicted: what a start (or a restart on new nodes) costs
before the run trains. Each term is a sourced figure or None where no public figure exists, so the
sum is a lower bound, never an invented number. `python -m analysis goodput --log` measures the
same span afterwards (analysis.startup).

    nodes      0 when the pool keeps the run's nodes up; otherwise not predicted (no public A3/A4
               provisioning time; it depends on the capacity mode and the zone's capacity)
    image      until the container starts: preloaded on a secondary boot disk, 0; streamed from
               Artifact Registry, STREAMED_START_S whatever the image's size; pulled whole, that
               plus the image's size over PULL_GB_PER_S (a NeMo image; another image's size is not
               known)
    preflight  NVSentinel's checks of the node (the platform's nvsentinel.preflight), on every start:
               DCGM diagnostics at NVSentinel's default level, about 2 minutes by its documentation;
               its NCCL loopback has no public figure
    pod start and NCCL initialisation: not predicted (no public figure at these scales)
    first step the published log's first step, for the run it was measured on only (another model
               or machine warms up differently)
"""

from __future__ import annotations

from dataclasses import dataclass

from facts import nvsentinel
from facts.registries import RegistryMirror, in_artifact_registry, parse_reference, resolve
from planners.pools import GpuPoolExport

# GoogleCloudPlatform/ai-on-gke:best-practices/startup-latency.md@8676d66 (line 143): a 5.4 GB image
# (NVIDIA Triton) starts end to end in 191 s pulled whole and in 30 s streamed; the difference is the pull.
_MEASURED_GB, _PULLED_S, STREAMED_START_S = 5.4, 191.0, 30.0
PULL_GB_PER_S = _MEASURED_GB / (_PULLED_S - STREAMED_START_S)
PULL_SOURCE = "ai-on-gke best-practices/startup-latency.md@8676d66: 5.4 GB in 191 s pulled, 30 s streamed"
# A NeMo Framework container on disk: 29 GB (24.12, NVIDIA-NeMo/Speech#11824) to 36.4 GB (25.07 gpt_oss).
NEMO_IMAGE_GB = 30.0
NEMO_REPOSITORY = "nvidia/nemo"
# The published GPT-3 175B A3 Mega DLLogger log (gpu-recipes training/a3mega/gpt3_175b, 256 GPUs): its
# first step took 107 s (train_step_timing of step 1), where steady steps are 25.6 s apart.
FIRST_STEP_S = 107.0
FIRST_STEP_RUN = ("gpt3-175b", "a3-megagpu-8g")
FIRST_STEP_SOURCE = "published GPT-3 175B A3 Mega DLLogger log: first step 107 s"


@dataclass(frozen=True)
class Term:
    name: str
    seconds: float | None
    how: str


@dataclass(frozen=True)
class FirstStep:
    terms: tuple[Term, ...]

    @property
    def known_seconds(self) -> float:
        """The terms with a public figure: a lower bound of the time to the first step."""
        return sum(t.seconds for t in self.terms if t.seconds is not None)


def image_term(image: str, pool: GpuPoolExport, mirror: RegistryMirror | None) -> Term:
    if pool.preloaded_image == image:
        return Term("image", 0.0, "preloaded on the nodes' secondary boot disks")
    pulled_as = resolve(image, mirror)
    if pool.image_streaming and in_artifact_registry(pulled_as):
        return Term("image", STREAMED_START_S, f"streamed from Artifact Registry ({PULL_SOURCE})")
    if parse_reference(image).path == NEMO_REPOSITORY:
        seconds = STREAMED_START_S + NEMO_IMAGE_GB / PULL_GB_PER_S
        how = f"pulled whole: {NEMO_IMAGE_GB:.0f} GB at {PULL_GB_PER_S * 1000:.1f} MB/s ({PULL_SOURCE})"
        return Term("image", seconds, how)
    return Term("image", None, "pulled whole; the image's size is not known")


def preflight_term(checks: tuple[str, ...]) -> Term:
    """NVSentinel's preflight checks, run before the pod's containers at every start."""
    dcgm = nvsentinel.PREFLIGHT_DCGM_DIAG in checks
    seconds = float(nvsentinel.PREFLIGHT_DCGM_DIAG_SECONDS) if dcgm else None
    how = [f"{nvsentinel.PREFLIGHT_DCGM_DIAG}: about 2 min at NVSentinel's default level 2"] if dcgm else []
    how += [f"{c}: no public figure" for c in checks if c != nvsentinel.PREFLIGHT_DCGM_DIAG]
    return Term("preflight", seconds, f"NVSentinel's, on every start; {'; '.join(how)}")


def first_step(
    image: str,
    model: str,
    nodes: int,
    pool: GpuPoolExport,
    mirror: RegistryMirror | None,
    *,
    node_checks: tuple[str, ...] | None = None,
) -> FirstStep:
    """The predicted time from a run's submission to the end of its first step, term by term;
    `node_checks`: NVSentinel's preflight checks of each start (the run's plan)."""
    if pool.min_nodes >= nodes:
        node_term = Term("nodes", 0.0, "the pool keeps the run's nodes up")
    else:
        node_term = Term("nodes", None, f"provisioned on demand ({pool.capacity_type.value}): no public figure")
    if (model, pool.machine_type) == FIRST_STEP_RUN:
        step = Term("first step", FIRST_STEP_S, FIRST_STEP_SOURCE)
    else:
        step = Term("first step", None, "published for GPT-3 175B on A3 Mega only")
    return FirstStep(
        (
            node_term,
            image_term(image, pool, mirror),
            *((preflight_term(node_checks),) if node_checks else ()),
            Term("pod start and NCCL", None, "no public figure at this scale"),
            step,
        )
    )


def preload_advice(run_name: str, image: str, pool: GpuPoolExport) -> str | None:
    """A run on a preloaded pool whose image is another one: it streams or pulls instead."""
    if pool.preloaded_image is None or pool.preloaded_image == image:
        return None
    return (
        f"run {run_name}: pool {pool.name} preloads {pool.preloaded_image}, and the run's image {image} is fetched "
        "instead; preload the run's image on a pool of its own, or run the preloaded image"
    )
