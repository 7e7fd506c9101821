"""Training analytics for NeMo runs: step time, TFLOPS per GPU, MFU, goodput and plots, and
the bus bandwidth of nccl-tests runs against published figures.

Run as `python -m analysis {metrics,plot,goodput,nccl}`; `python -m analysis.benchmark` times
`metrics` on a generated 100 000-step log; `python -m analysis.samples --write examples/logs`
writes the sample logs the docs run the commands on. Model FLOPs come from
`components.models.Architecture` and peaks from `components.catalog`, so the analytics and
the platform share one set of facts.
"""

from analysis.errors import AnalysisError

__all__ = ["AnalysisError"]
