"""Training analytics for NeMo runs: step time, TFLOPS per GPU, MFU, goodput and plots.

Run as `python -m analysis {metrics,plot,goodput}`; `python -m analysis.benchmark` times
`metrics` on a generated 100 000-step log. Model FLOPs come from
`components.models.Architecture` and peaks from `components.catalog`, so the analytics and
the platform share one set of facts.
"""

from analysis.errors import AnalysisError

__all__ = ["AnalysisError"]
