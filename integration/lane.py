"""The integration lane's cluster: etcd, the Kubernetes control plane and kwok's simulated GPU
nodes on loopback, from the binaries `integration/build-tools.sh` builds, with the CRDs of the
pinned Kueue and JobSet modules installed.

    python -m integration.lane up --dir DIR [--stack S]   start, then hold until interrupted (by
                                                          hand: DIR/admin.kubeconfig reaches it)
    python -m integration.lane down --dir DIR             stop what `up` started

tests/integration/test_lane.py starts one per stack and checks what the real controllers do.

Every process listens on 127.0.0.1 only and is stopped by its process id. The nodes are shaped
like the stack's GPU pools: their labels (the pool's selector, GKE's accelerator and topology
labels), the GPU taint and allocatable GPUs, CPUs and memory of the machine type.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from facts.controller_api import CONTROLLER_KINDS
from harness.runner import StackRun, run_stack
from integration.controllers import (
    PINNED,
    Release,
    controller_api_check,
    controllers,
    install_crds,
    install_driver_stand_ins,
    lane_kueue_config,
)
from integration.controlplane import Api, Lane, control_plane, stop_pids
from integration.nodes import nvlink_nodes, simulated_nodes
from integration.runs import api_path, claim_volumes, stack_objects

# --------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Started:
    """A lane ready for the stack: what it holds, and what the program's own check of an existing
    cluster's Kueue and JobSet (kueue.install: false) said of it before and after the CRDs."""

    api: Api
    nodes: int
    crds: int
    refused_before_crds: list[str]
    refused_after_crds: list[str]
    seconds: float


def start(
    lane: Lane,
    run: StackRun,
    *,
    pods_complete: bool = True,
    kueue_config: Mapping[str, Any] | None = None,
    release: Release = PINNED,
) -> Started:
    """The control plane, nodes shaped like the stack's pools, the CRDs and the managers of the
    release, the latter configured as the stack configures Kueue (`kueue_config`: as a stack of no
    file does). Prints each phase's time."""
    started = time.monotonic()
    api = control_plane(lane)
    nodes = simulated_nodes(lane, api, run, pods_complete)
    before = controller_api_check(lane)
    count = install_crds(lane, api, release)
    after = controller_api_check(lane)
    if len(before) != len(CONTROLLER_KINDS) or after:
        # The program's check must refuse every kind on a cluster without the CRDs, none with them.
        raise RuntimeError(f"the program's CRD check: before the CRDs {before}; after {after}")
    nvlink = nvlink_nodes(run)
    if nvlink:
        install_driver_stand_ins(lane, api, nvlink)
    controllers(lane, api, kueue_config if kueue_config is not None else lane_kueue_config(run), release)
    took = time.monotonic() - started
    print(f"lane: ready in {took:.1f} s: {nodes} nodes, {count} CRDs ({lane.workdir})", flush=True)
    return Started(api, nodes, count, before, after, took)


@contextmanager
def running(
    run: StackRun,
    *,
    pods_complete: bool = True,
    kueue_config: Mapping[str, Any] | None = None,
    release: Release = PINNED,
) -> Iterator[tuple[Lane, Started]]:
    """A lane started for the stack in a temporary folder, stopped and removed afterwards (kept
    where LANE_KEEP is set); a process that died meanwhile fails the caller."""
    workdir = Path(tempfile.mkdtemp(prefix=f"nemo-gke-lane-{run.stack}-"))
    lane = Lane(workdir)
    try:
        yield lane, start(lane, run, pods_complete=pods_complete, kueue_config=kueue_config, release=release)
        lane.check_alive()
    finally:
        lane.stop()
        if not os.environ.get("LANE_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def up(stack: str, workdir: Path) -> int:
    """Start the lane and hold it (the stack's claims bind to local volumes) until interrupted."""
    run = run_stack(stack)
    workdir.mkdir(parents=True, exist_ok=True)
    lane = Lane(workdir)
    # SIGTERM stops the lane like ^C does: through the `finally` below.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        api = start(lane, run).api
        for manifest in claim_volumes(stack_objects(run)):
            api.create(api_path(manifest), manifest)
        print(f"lane: up; KUBECONFIG={workdir / 'admin.kubeconfig'} (context lane); interrupt to stop", flush=True)
        while True:
            lane.check_alive()
            time.sleep(2)
    except KeyboardInterrupt:
        return 0
    finally:
        lane.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m integration.lane", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--stack", default="existing", help="stack whose GPU pools the nodes imitate")
    parser.add_argument("--dir", type=Path, help="down: the work directory of a lane")
    args = parser.parse_args(argv)
    if args.dir is None:
        parser.error(f"{args.command} needs --dir")
    if args.command == "down":
        stop_pids(args.dir)
        return 0
    return up(args.stack, args.dir)


if __name__ == "__main__":
    sys.exit(main())
