"""On-demand prices of the machines and the Filestore tiers, for the go/no-go summary's estimates only.

Google's machine pricing pages could not be read where this table was made; machine figures come
from the SkyPilot catalog, which lists each machine's host part (vCPU and memory) and its GPUs on
separate rows: the price here is their sum. That catalog is not consistent across regions
(the same H100 costs 4.20 USD/h in us-central1 and 9.80 USD/h in us-east4), so every figure is
an estimate to size a decision, never a quote. A4 and A3 Ultra may not be sold on demand at
all (only reserved, Spot or through the Dynamic Workload Scheduler): their figure prices the
hardware, not an offer. The one Filestore figure is the worked example of Google's Filestore
pricing page, the only region it names; every other tier and region is not priced.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

SOURCE = "skypilot-org/skypilot-catalog:catalogs/v8/gcp/vms.csv@006059e0 (host row + GPU row), read 2026-11-22"

# USD per node-hour, on demand: (machine type, region) → host part + GPU part; a CPU machine
# (the system and supervisor pools' e2 types) has its one row.
ON_DEMAND_USD_PER_HOUR: Mapping[tuple[str, str], float] = MappingProxyType(
    {
        ("a3-highgpu-8g", "us-central1"): 9.46006 + 33.60609,
        ("a3-highgpu-8g", "us-east4"): 9.46006 + 78.37241,
        ("a3-highgpu-8g", "us-east5"): 10.65487 + 88.2708,
        ("a3-highgpu-8g", "europe-west4"): 9.93306 + 101.88413,
        ("a3-highgpu-8g", "asia-northeast1"): 12.14861 + 33.60609,
        ("a3-megagpu-8g", "us-central1"): 9.46006 + 82.75421,
        ("a3-megagpu-8g", "us-east4"): 9.46006 + 82.75424,
        ("a3-megagpu-8g", "us-east5"): 10.65487 + 35.39149,
        ("a3-megagpu-8g", "europe-west4"): 9.93306 + 107.58048,
        ("a3-megagpu-8g", "asia-northeast1"): 12.14861 + 35.39149,
        ("a3-ultragpu-8g", "us-central1"): 12.266 + 74.49392,
        ("a3-ultragpu-8g", "us-east4"): 12.266 + 74.49392,
        ("a3-ultragpu-8g", "us-east5"): 13.81519 + 36.60258,
        ("a3-ultragpu-8g", "europe-west4"): 12.8793 + 36.60258,
        # The catalog's A4 host rows are 0.0: the GPU row is the whole figure.
        ("a4-highgpu-8g", "us-central1"): 90.216,
        ("a4-highgpu-8g", "us-east4"): 64.44,
        ("a4-highgpu-8g", "europe-west4"): 90.216,
        ("a4-highgpu-8g", "asia-northeast1"): 64.44,
        ("a3-highgpu-1g", "us-central1"): 1.18251 + 4.20076,
        ("a3-highgpu-1g", "us-east4"): 1.18251 + 9.79655,
        ("a3-highgpu-1g", "us-east5"): 1.33186 + 11.03385,
        ("a3-highgpu-1g", "europe-west4"): 1.24163 + 12.73552,
        ("a3-highgpu-1g", "asia-northeast1"): 1.51858 + 4.20076,
        ("a3-highgpu-2g", "us-central1"): 2.36502 + 8.40152,
        ("a3-highgpu-2g", "us-east4"): 2.36502 + 19.5931,
        ("a3-highgpu-2g", "us-east5"): 2.66372 + 22.0677,
        ("a3-highgpu-2g", "europe-west4"): 2.48327 + 25.47103,
        ("a3-highgpu-2g", "asia-northeast1"): 3.03715 + 8.40152,
        ("a3-highgpu-4g", "us-central1"): 4.73003 + 16.80304,
        ("a3-highgpu-4g", "us-east4"): 4.73003 + 39.1862,
        ("a3-highgpu-4g", "us-east5"): 5.32743 + 44.1354,
        ("a3-highgpu-4g", "europe-west4"): 4.96653 + 50.94206,
        ("a3-highgpu-4g", "asia-northeast1"): 6.07431 + 16.80304,
        ("e2-standard-4", "us-central1"): 0.13402,
        ("e2-standard-4", "us-east4"): 0.15094,
        ("e2-standard-4", "us-east5"): 0.13402,
        ("e2-standard-4", "europe-west1"): 0.14743,
        ("e2-standard-4", "europe-west4"): 0.14754,
        ("e2-standard-4", "asia-northeast1"): 0.17193,
        ("e2-standard-8", "us-central1"): 0.26805,
        ("e2-standard-8", "us-east4"): 0.30188,
        ("e2-standard-8", "us-east5"): 0.26805,
        ("e2-standard-8", "europe-west1"): 0.29486,
        ("e2-standard-8", "europe-west4"): 0.29509,
        ("e2-standard-8", "asia-northeast1"): 0.34386,
    }
)

FILESTORE_SOURCE = "https://cloud.google.com/filestore/pricing (its pricing example: Basic HDD in us-west1)"

# USD per provisioned GiB-hour: (tier, region). Billed on the capacity provisioned, not used.
FILESTORE_USD_PER_GIB_HOUR: Mapping[tuple[str, str], float] = MappingProxyType(
    {
        ("BASIC_HDD", "us-west1"): 0.000274,
    }
)

# What no estimate here includes, whatever the stack.
NEVER_PRICED = (
    "the GKE cluster management fee",
    "boot disks and local SSDs",
    "Cloud Storage buckets (data, checkpoints, state)",
    "network egress",
    "Cloud Monitoring and Cloud Logging ingestion",
    "Cloud KMS key versions and Artifact Registry storage",
)


def on_demand_usd_per_hour(machine_type: str, region: str) -> float | None:
    """The estimated on-demand price of one node, or None where the table has none."""
    return ON_DEMAND_USD_PER_HOUR.get((machine_type, region))


def filestore_usd_per_gib_hour(tier: str, region: str) -> float | None:
    """The price of one provisioned GiB for an hour, or None where the table has none."""
    return FILESTORE_USD_PER_GIB_HOUR.get((tier, region))


# Cloud Storage network usage between regions, per GiB read or written in another region: the
# lowest rate, between regions of one continent; between continents costs more
# (https://cloud.google.com/storage/pricing#network-buckets, "Data transfer within Google Cloud").
INTER_REGION_STORAGE_USD_PER_GIB = 0.02
INTER_REGION_STORAGE_SOURCE = "cloud.google.com/storage/pricing#network-buckets, within a continent"
