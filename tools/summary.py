"""The go/no-go summary as Markdown (`build/<stack>/summary.md`, printed by `make render`):
the program's warnings first, then what the stack asks for and an estimate of what it costs,
from the stack output `summary` (planners/summary.py decides every figure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tools.mocks import LogWarning


def _usd(value: float | None, unit: str = "") -> str:
    return "not priced" if value is None else f"~{value:,.0f} USD{unit}"


def _hours(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value * 60:.0f} min" if value < 1 else f"{value:.1f} h"


def markdown(stack: str, summary: Mapping[str, Any] | None, warnings: Sequence[LogWarning]) -> str:
    lines = [f"# Go/no-go: stack {stack}", ""]
    if warnings:
        lines += [f"> **warning** ({w.resource_name}): {w.message}" for w in warnings] + [""]
    if summary is None:
        return "\n".join([*lines, "This stack creates no GPU capacity.", ""])
    if summary["region"]:
        lines += [f"Project `{summary['project']}`, region `{summary['region']}`, zone `{summary['zone']}`.", ""]
    else:
        lines += ["An existing cluster: the stack describes its pools and creates none.", ""]
    lines += [
        "| Pool | Machine | Nodes | GPUs | Capacity | Reservation | Per hour, all nodes up |",
        "|---|---|---:|---:|---|---|---|",
    ]
    for pool in summary["pools"]:
        lines.append(
            f"| {pool['name']} | {pool['machineType']} | {pool['nodes']} | {pool['gpus']} | {pool['capacity']} | "
            f"{pool['reservation'] or '-'} | {_usd(pool['usdPerHour'], '/h')} ({pool['pricing']}) |"
        )
    lines += ["", f"On-demand total with every priced pool at full size: {_usd(summary['usdPerHour'], '/h')}.", ""]
    if summary["runs"]:
        lines += [
            "| Run | Model | Pool | Nodes | GPUs | Steps | Step time | Duration | Cost |",
            "|---|---|---|---:|---:|---:|---|---|---|",
        ]
        for run in summary["runs"]:
            step = f"{run['stepTimeS']:.1f} s" if run["stepTimeS"] is not None else "unknown"
            cost = "unknown" if run["hours"] is None else _usd(run["usd"])
            lines.append(
                f"| {run['name']} | {run['model']} | {run['pool']} | {run['nodes']} | {run['gpus']} | "
                f"{run['steps']} | {step} | {_hours(run['hours'])} | {cost} |"
            )
        sources = sorted({run["stepTimeSource"] for run in summary["runs"] if run["stepTimeSource"]})
        if sources:
            lines += ["", f"Step times are published ones, at the run's exact layout: {', '.join(sources)}."]
        lines += [
            "",
            "A run without a published step time at its layout has no expected duration: measure one "
            "with `python -m analysis metrics`.",
        ]
    lines += [
        "",
        f"Every price is an **estimate** from {summary['priceSource']}, for on-demand capacity: "
        "Spot, reservations and the Dynamic Workload Scheduler are not priced here.",
        "",
    ]
    return "\n".join(lines)
