"""What the pods run, shipped in their ConfigMaps as written here: the training launcher
(`launch.sh`), the NeMo 2 and Megatron-Bridge entry points (`nemo2_pretrain.py`,
`megatron_bridge_pretrain.py`) with the step record they print (`step_record.py`,
`lightning_step_log.py`), a stand-in for NVIDIA's dllogger (`dllogger.py`) and the fabric check
(`nccl_test.sh`). These files run inside the NeMo and NCCL
images, not in this program: they import what those images hold. This module only reads them."""

from __future__ import annotations

import functools
from pathlib import Path

DIR = Path(__file__).parent


@functools.cache
def text(name: str) -> str:
    """A payload file's contents, as its ConfigMap carries it."""
    return (DIR / name).read_text()
