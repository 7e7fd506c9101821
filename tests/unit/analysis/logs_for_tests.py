"""Writers for the logs the analysis tests feed the tool, in the three formats NeMo produces:
DLLogger's JSON stream backend (its line writer is `analysis.samples`', shared with the sample
logs), NeMo 1.x tqdm progress bars, NeMo 2.x ProgressPrinter lines; none from `analysis/`'s readers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from analysis.samples import dllogger_line, step_data

ROOT = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("NEMO_SHARED_DIR", ROOT.parent / "shared"))
SHARED_LOG = SHARED / "testdata" / "gpt3-175b-a3mega-256gpu-dllogger.json"
# The reference log is public data that is never committed here: the tests about it run where
# ../shared (or NEMO_SHARED_DIR) provides it and are skipped, with this reason, elsewhere.
needs_shared_log = pytest.mark.skipif(
    not SHARED_LOG.is_file(),
    reason=f"the reference DLLogger log {SHARED_LOG} is absent (it lives beside the checkout, never in it); "
    "the generated logs with known answers cover the same code",
)

GPT_PARAMETERS: dict[str, object] = {
    "cfg/micro_batch_size": 1,
    "cfg/encoder_seq_length": 128,
    "cfg/max_position_embeddings": 128,
    "cfg/num_layers": 2,
    "cfg/hidden_size": 64,
    "cfg/ffn_hidden_size": None,  # NeMo's default: 4 × hidden
    "cfg/num_attention_heads": 4,
    "cfg/num_query_groups": None,  # no GQA
    "cfg/activations_checkpoint_num_layers": None,
    "cfg/tokenizer/library": "megatron",
    "cfg/tokenizer/type": "GPT2BPETokenizer",
    "cfg/data/seq_length": 4096,  # deeper key: must lose to encoder_seq_length
}
LLAMA_PARAMETERS: dict[str, object] = {
    "cfg/encoder_seq_length": 512,
    "cfg/num_layers": 3,
    "cfg/hidden_size": 256,
    "cfg/ffn_hidden_size": 688,
    "cfg/num_attention_heads": 8,
    "cfg/num_query_groups": 2,
    "cfg/activation": "fast-swiglu",
    "cfg/tokenizer/library": "huggingface",
    "cfg/tokenizer/type": "meta-llama/Meta-Llama-3.1-8B",
}


def write_dllogger(path: Path, step_times: Sequence[float], parameters: Mapping[str, object] | None = None) -> Path:
    """PARAMETER record (if given), then steps 0..n-1 with the given timings and a falling loss."""
    lines = [] if parameters is None else [dllogger_line("PARAMETER", parameters)]
    lines += [dllogger_line(step, step_data(step, t, loss=10.0 - step / 10)) for step, t in enumerate(step_times)]
    path.write_text("\n".join(lines) + "\n")
    return path


def nemo1_update(step: int, total: int, step_time: str, *, global_step: bool = True) -> str:
    """One tqdm redraw of NeMo 1.x's CustomProgressBar (desc `Epoch 0: `, n/total = steps done)."""
    done = step + 1
    postfix = f"reduced_train_loss={10 - step / 10:.3f}, "
    if global_step:
        postfix += f"global_step={step:.3f}, "
    postfix += f"consumed_samples={done * 256:.1f}, train_step_timing in s={step_time}"
    return f"Epoch 0: : {100 * done // total:3d}%|####      | {done}/{total} [06:19<07:13, {postfix}]"


def nemo2_line(step: int, total: int, step_time: str, *, global_step: bool = True) -> str:
    """One NeMo 2.x ProgressPrinter line (0-based iteration)."""
    line = f"Training epoch 0, iteration {step}/{total - 1} | lr: 1.5e-05"
    if global_step:
        line += f" | global_step: {step}"
    return (
        line
        + f" | consumed_samples: {(step + 1) * 256} | reduced_train_loss: 11.03 | train_step_timing in s: {step_time}"
    )


def valid_gpt_log(folder: Path) -> Path:
    """A well-formed GPT DLLogger log (40 steps of 3 s), for tests about other input."""
    return write_dllogger(folder / "gpt.json", [3.0] * 40, GPT_PARAMETERS)


def write_restarted_dllogger(
    path: Path,
    first: Sequence[float],
    resume_at: int,
    second: Sequence[float],
    parameters: Mapping[str, object] | None = None,
) -> Path:
    """A run that logs steps 0.. with `first`, dies, and is restarted from a checkpoint at `resume_at`:
    the restart appends its own PARAMETER record and logs steps resume_at.. again with `second`."""
    lines = [] if parameters is None else [dllogger_line("PARAMETER", parameters)]
    lines += [dllogger_line(step, step_data(step, t, loss=10.0 - step / 10)) for step, t in enumerate(first)]
    lines += [] if parameters is None else [dllogger_line("PARAMETER", parameters)]
    lines += [
        dllogger_line(step, step_data(step, t, loss=5.0 - step / 10)) for step, t in enumerate(second, start=resume_at)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
