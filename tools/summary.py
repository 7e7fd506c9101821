"""The go/no-go summary as Markdown (`build/<stack>/summary.md`, printed by `make render`):
the program's warnings first, each once, then what the stack asks for and an estimate of what
it costs, what is not priced, and last the verdict, from the stack output `summary`
(planners/summary.py decides every figure and the verdict)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from facts.kueue import MULTIKUEUE_DISPATCH_ROUND_SECONDS, Dispatch
from harness.mocks import LogWarning

GO = "**Verdict: GO**"
NO_GO = "**Verdict: NO-GO**"


def _usd(value: float | None, unit: str = "") -> str:
    return "not priced" if value is None else f"~{value:,.2f} USD{unit}" if value < 10 else f"~{value:,.0f} USD{unit}"


def _hours(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value * 60:.0f} min" if value < 1 else f"{value:.1f} h"


def warning_lines(warnings: Sequence[LogWarning]) -> list[str]:
    """Each warning once, in the order first given, with every resource that gave it: the same
    advice from several resources (or from a stack and the one it references) is one line."""
    resources: dict[str, list[str]] = {}
    for warning in warnings:
        names = resources.setdefault(warning.message, [])
        if warning.resource_name not in names:
            names.append(warning.resource_name)
    return [f"> **warning** ({', '.join(names)}): {message}" for message, names in resources.items()]


def verdict(summary: Mapping[str, Any]) -> str:
    reasons = summary["noGo"]
    return f"{NO_GO}: {'; '.join(reasons)}." if reasons else f"{GO}: nothing found that stops `pulumi up`."


def _pools(summary: Mapping[str, Any]) -> list[str]:
    lines = [
        "| Pool | Machine | Nodes | GPUs | Capacity | Reservation | Per hour, all nodes up |",
        "|---|---|---:|---:|---|---|---|",
    ]
    for pool in summary["pools"]:
        lines.append(
            f"| {pool['name']} | {pool['machineType']} | {pool['nodes']} | {pool['gpus']} | {pool['capacity']} | "
            f"{pool['reservation'] or '-'} | {_usd(pool['usdPerHour'], '/h')} ({pool['pricing']}) |"
        )
    for pool in summary["cpuPools"]:
        lines.append(
            f"| {pool['name']} | {pool['machineType']} | {pool['nodes']} | 0 | onDemand | - | "
            f"{_usd(pool['usdPerHour'], '/h')} ({pool['pricing']}) |"
        )
    filestore = summary["filestore"]
    if filestore is not None:
        lines += [
            "",
            f"Filestore {filestore['tier']}, {filestore['capacityGib']} GiB: "
            f"{_usd(filestore['usdPerHour'], '/h')} ({filestore['pricing']}).",
        ]
    return lines


def _teams(summary: Mapping[str, Any]) -> list[str]:
    lines = [
        "| Team | Namespace | Guaranteed | Weight | Guarantee per hour |",
        "|---|---|---|---:|---|",
    ]
    for team in summary["teams"]:
        lines.append(
            f"| {team['name']} | {team['namespace']} | {', '.join(team['shares'])} | {team['weight']} | "
            f"{_usd(team['usdPerHour'], '/h')} |"
        )
    return [
        *lines,
        "",
        "A team's guarantee costs the same whether it runs on it or lends it; the pools' nodes no team is "
        "guaranteed are the cohort's, borrowable by all (docs/teams.md).",
    ]


def _chain(run: Mapping[str, Any]) -> str:
    links = []
    for link in run["chain"]:
        if link["usdPerHour"] is None:
            price = "not priced"
        else:
            whole = "duration unknown" if link["usd"] is None else f"{_usd(link['usd'])} for the run"
            price = f"{_usd(link['usdPerHour'], '/h')} for its nodes, {whole}"
        where = link["pool"] if link["worker"] is None else f"{link['pool']} on {link['worker']}"
        links.append(f"{where} ({link['capacity']}: {price}; wait: {link['wait']})")
    if run["dispatch"] == Dispatch.ALL_AT_ONCE:
        lead = f"{run['name']} is offered to every worker at once and runs on the first to admit it: "
        return lead + "; ".join(links) + "."
    if run["dispatch"] == Dispatch.IN_ORDER:
        each = MULTIKUEUE_DISPATCH_ROUND_SECONDS // 60
        lead = f"{run['name']} is offered to the workers in this order, one more each {each} minutes none admits it: "
    else:
        lead = f"{run['name']} runs on the first pool of its chain with room, in this order: "
    return lead + ", then ".join(links) + "."


def _checkpoints(run: Mapping[str, Any]) -> str | None:
    if not run["checkpointSaves"]:
        return None
    how = "in the background while training goes on" if run["checkpointAsync"] else "while training waits"
    saves = run["checkpointSaves"]
    line = (
        f"{run['name']} saves {saves} checkpoint{'' if saves == 1 else 's'}, each written to the bucket in about "
        f"{run['checkpointWriteS']:.0f} s {how}"
    )
    wait = run["checkpointWaitS"]
    if wait is None:
        return line + "; how long its steps wait for them depends on a step time nobody published."
    share = f" ({wait / (wait + run['steps'] * run['stepTimeS']):.0%} of its time)" if run["stepTimeS"] else ""
    return line + f"; its steps wait {wait:.0f} s for them in all{share}, in its duration and cost."


def _runs(summary: Mapping[str, Any]) -> list[str]:
    lines = [
        "| Run | Model | Runtime | Image | Pool | Nodes | GPUs | Steps | Restarts | Step time | Duration | Cost "
        "| First step | Before it |",
        "|---|---|---|---|---|---:|---:|---:|---:|---|---|---|---|---|",
    ]
    for run in summary["runs"]:
        step = f"{run['stepTimeS']:.1f} s" if run["stepTimeS"] is not None else "unknown"
        if run.get("stepTimePredicted"):
            step += " (predicted)"
        cost = "unknown" if run["hours"] is None else _usd(run["usd"])
        # The terms without a public figure are left out: a lower bound.
        first = f"≥ {run['firstStepS'] / 60:.1f} min"
        waiting = "not priced" if run["firstStepUsd"] is None else "≥ " + _usd(run["firstStepUsd"])
        lines.append(
            f"| {run['name']} | {run['model']} | {run['runtime']} | `{run['image']}` | {run['pool']} | "
            f"{run['nodes']} | {run['gpus']} | {run['steps']} | {run['maxRestarts']} | {step} | {_hours(run['hours'])} "
            f"| {cost} "
            f"| {first} | {waiting} |"
        )
    for run in summary["runs"]:
        lines += ["", f"Time to {run['name']}'s first step: " + "; ".join(run["firstStepTerms"]) + "."]
    for run in summary["runs"]:
        if run.get("plannedLayout"):
            lines += [
                "",
                f"{run['name']}'s layout is the layout planner's ({run['plannedLayout']}): the fastest it predicts "
                "for the run's nodes, batch and precision, or the recipe's where that is as fast; kept while the "
                "run's revision stands.",
            ]
    for run in summary["runs"]:
        if run.get("chain"):
            lines += ["", _chain(run)]
    for run in summary["runs"]:
        if line := _checkpoints(run):
            lines += ["", line]
    sources = sorted({run["stepTimeSource"] for run in summary["runs"] if run["stepTimeSource"]})
    if sources:
        lines += ["", f"Step times are published ones, at the run's exact layout: {', '.join(sources)}."]
    for run in summary["runs"]:
        if run["stepTimeMeasuredWith"]:
            lines += [
                "",
                f"{run['name']}'s published step time was measured with {run['stepTimeMeasuredWith']}, a "
                "benchmark-only setting the run does not use: its steps, duration and cost may be higher.",
            ]
    unknown = [run["name"] for run in summary["runs"] if run["stepTimeS"] is None]
    if any(run.get("stepTimePredicted") for run in summary["runs"]):
        lines += [
            "",
            "A step time marked predicted is the layout planner's for the run's layout, none being published "
            "(docs/training.md, Layouts: dense models' published rows held out come within 15 %, mixture-of-experts "
            "ones are often much further off); hold the run to it with `python -m analysis metrics --plan`.",
        ]
    if unknown:
        lines += [
            "",
            f"{', '.join(unknown)} {'has' if len(unknown) == 1 else 'have'} no expected duration: no step time is "
            "published at the layout, and the layout planner predicts none (a machine outside the catalog, or experts "
            "spread over nodes without GPU NICs); measure one with `python -m analysis metrics`.",
        ]
    return [
        *lines,
        "",
        "Restarts: how often a failure other than a program error (a lost node, an NCCL error, a crashed rank) "
        "restarts the whole run, from its newest checkpoint, before it fails (docs/recovery.md); 0 fails it at once.",
    ]


def _spares(summary: Mapping[str, Any]) -> list[str]:
    lines = ["| Pool | Spare nodes | Standing | Per hour |", "|---|---:|---|---|"]
    for spare in summary["spares"]:
        lines.append(
            f"| {spare['pool']} | {spare['nodes']} | {'yes' if spare['standing'] else 'no'} | "
            f"{_usd(spare['usdPerHour'], '/h') if spare['nodes'] else '-'} ({spare['pricing']}) |"
        )
    return [
        *lines,
        "",
        "Spare nodes are a pool's nodes beyond its largest run: a failed node of a run is replaced from them "
        "without waiting for capacity (docs/recovery.md).",
    ]


def markdown(stack: str, summary: Mapping[str, Any] | None, warnings: Sequence[LogWarning]) -> str:
    lines = [f"# Go/no-go: stack {stack}", ""]
    if warnings:
        lines += [*warning_lines(warnings), ""]
    if summary is None:
        return "\n".join([*lines, "This stack has no summary: nothing to price or judge.", ""])
    if summary["region"]:
        lines += [f"Project `{summary['project']}`, region `{summary['region']}`, zone `{summary['zone']}`.", ""]
    else:
        lines += ["An existing cluster: the stack describes its pools and creates none.", ""]
    if summary["pools"] or summary["cpuPools"] or summary["filestore"]:
        lines += [
            *_pools(summary),
            "",
            f"On-demand total with every priced pool at full size: {_usd(summary['usdPerHour'], '/h')}.",
            "",
        ]
    else:
        lines += ["This stack creates no node pool and no file system.", ""]
    if summary.get("teams"):
        lines += [*_teams(summary), ""]
    if summary["runs"]:
        lines += [*_runs(summary), ""]
    if summary.get("spares"):
        lines += [*_spares(summary), ""]
    lines += [
        f"Every price is an **estimate** from {summary['priceSource']}, for on-demand capacity: "
        "Spot, reservations and the Dynamic Workload Scheduler are not priced here.",
        "",
        "Not priced:",
        "",
        *(f"- {item}" for item in summary["notPriced"]),
        "",
        verdict(summary),
        "",
    ]
    return "\n".join(lines)
