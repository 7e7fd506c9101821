"""GPU capacity booked ahead: a pool whose reservation this stack requests in calendar mode
(facts.gke.BOOKING_*, with sources), consumed by name from its start."""

from __future__ import annotations

from typing import Any

import pytest

from harness.runner import stack_with
from tests.conftest import issue_for, rejected

START = "2026-12-14T00:00:00Z"
ONE_DAY = {"start": START, "days": 1}


def booked_pool(**changes: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": "a4",
        "machineType": "a4-highgpu-8g",
        "autoscaling": {"minNodes": 0, "maxNodes": 8},
        "capacity": {"type": "reservation", "booking": {"start": START, "days": 14}},
    }
    return {**pool, **changes}


def a4_with(pool: dict[str, Any]) -> dict[str, Any]:
    return stack_with("a4", gpuPools=[pool], training={})


def test_a_booked_pool_requests_its_reservation_in_calendar_mode_and_consumes_it_by_name(render: Any) -> None:
    run = render("a4", values=a4_with(booked_pool()))
    (booking,) = run.of_type("gcp:compute/futureReservation:FutureReservation")
    inputs = booking.inputs
    assert inputs["reservationMode"] == "CALENDAR" and inputs["planningStatus"] == "SUBMITTED"
    assert inputs["timeWindow"] == {"startTime": START, "endTime": "2026-12-28T00:00:00Z"}
    assert inputs["specificSkuProperties"] == {
        "instanceProperties": {"machineType": "a4-highgpu-8g"},
        "totalCount": "8",
    }
    # Calendar mode deletes the reservation and its VMs at the end; only the pool may consume it.
    assert inputs["autoDeleteAutoCreatedReservations"] is True and inputs["specificReservationRequired"] is True
    # A submitted request mostly cannot be cancelled: destroy leaves it instead of failing.
    assert inputs["deletionPolicy"] == "ABANDON"
    name = inputs["reservationName"]
    assert name == inputs["name"] == "nemo-a4-a4" and inputs["zone"] == "us-central1-b"
    (pool,) = [r for r in run.of_type("gcp:container/nodePool:NodePool") if r.inputs["name"] == "a4"]
    assert pool.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": [f"projects/your-gcp-project/reservations/{name}"],
    }
    # From zero: its nodes can exist only from the booking's start.
    assert pool.inputs["autoscaling"]["totalMinNodeCount"] == 0
    assert pool.inputs["autoscaling"]["totalMaxNodeCount"] == 8
    assert booking.urn in pool.dependencies
    warnings = [w.message for w in run.warnings if w.resource_name == "cluster-a4"]
    assert any("billed, used or not" in w and "pulumi destroy` leaves it" in w for w in warnings), warnings


def test_a_draft_booking_is_requested_for_review_without_the_warning(render: Any) -> None:
    pool = booked_pool(capacity={"type": "reservation", "booking": {"start": START, "days": 2, "draft": True}})
    run = render("a4", values=a4_with(pool))
    (booking,) = run.of_type("gcp:compute/futureReservation:FutureReservation")
    assert booking.inputs["planningStatus"] == "DRAFT"
    assert not [w for w in run.warnings if "calendar mode" in w.message]


def test_the_summary_states_the_booked_period_and_why_it_is_not_priced(render: Any) -> None:
    run = render("a4", values=a4_with(booked_pool()))
    (pool,) = [p for p in run.exports["summary"]["pools"] if p["name"] == "a4"]
    assert pool["reservation"] == "nemo-a4-a4" and pool["usdPerHour"] is None
    assert "booked in calendar mode from 2026-12-14T00:00:00Z to 2026-12-28T00:00:00Z" in pool["pricing"]
    # 8 VMs for 14 days.
    assert "billed for the whole period, used or not: 2,688 VM-hours" in pool["pricing"]


@pytest.mark.parametrize(
    ("pool", "key", "said"),
    [
        (booked_pool(capacity={"type": "reservation", "booking": {"start": START, "days": 91}}),
         "gpuPools[0].capacity.booking.days", "1 to 90 days"),
        (booked_pool(capacity={"type": "reservation", "booking": {"start": "2026-12-14T00:00:00+01:00", "days": 1}}),
         "gpuPools[0].capacity.booking.start", "UTC time in RFC 3339"),
        (booked_pool(capacity={"type": "spot", "booking": {"start": START, "days": 1}}),
         "gpuPools[0].capacity.booking", "needs capacity.type 'reservation'"),
        (booked_pool(capacity={"type": "reservation", "reservationProject": "other", "booking": ONE_DAY}),
         "gpuPools[0].capacity.reservationProject", "books a reservation in this project"),
        ({**booked_pool(autoscaling=None), "nodeCount": 8},
         "gpuPools[0].autoscaling", "scales from zero"),
        (booked_pool(machineType="a3-megagpu-8g"),
         "gpuPools[0].capacity.booking", "offered for a3-ultragpu-8g and a4-highgpu-8g, not a3-megagpu-8g"),
    ],
    ids=["91-days", "not-utc", "not-a-reservation", "another-project", "a-fixed-size", "a3-mega"],
)  # fmt: skip
def test_a_booking_calendar_mode_cannot_make_is_refused_by_key(pool: dict[str, Any], key: str, said: str) -> None:
    message = issue_for(rejected(a4_with(pool), "a4"), key)
    assert said in message, message


def test_an_unquoted_yaml_timestamp_is_read_as_the_pulumi_cli_hands_it_over(render: Any) -> None:
    """`start: 2026-12-14T00:00:00Z` without quotes is a YAML timestamp, which the Pulumi CLI passes
    as Go prints a time.Time."""
    pool = booked_pool(
        capacity={"type": "reservation", "booking": {"start": "2026-12-14 00:00:00 +0000 UTC", "days": 1}}
    )
    run = render("a4", values=a4_with(pool))
    (booking,) = run.of_type("gcp:compute/futureReservation:FutureReservation")
    assert booking.inputs["timeWindow"] == {"startTime": START, "endTime": "2026-12-15T00:00:00Z"}
