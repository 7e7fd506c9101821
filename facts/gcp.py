"""Google Cloud naming rules and service tiers, each with the page that states it.

Each rule is a function that returns what is wrong with a value (None when it is fine), so
the config schema and the components' argument checks say the same thing.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from enum import StrEnum
from types import MappingProxyType

# https://cloud.google.com/resource-manager/docs/creating-managing-projects (project ID)
_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
# https://cloud.google.com/compute/docs/naming-resources (RFC 1035 names)
_RESOURCE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# https://cloud.google.com/compute/docs/regions-zones
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_ZONE = re.compile(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")
# https://cloud.google.com/resource-manager/docs/labels-overview#requirements
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
# https://cloud.google.com/storage/docs/buckets#naming
_BUCKET_CHARACTERS = re.compile(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")
_GOOGLE_LOOKALIKE = re.compile(r"g[o0][o0]g[l1]e")


def project_id_problem(value: str) -> str | None:
    if value.startswith("<") or not _PROJECT_ID.match(value):
        return "must be your GCP project ID (6-30 lower-case letters, digits, '-', starting with a letter)"
    return None


def resource_name_problem(value: str, max_length: int) -> str | None:
    if len(value) > max_length or not _RESOURCE_NAME.match(value):
        return (
            f"must be 1-{max_length} characters of lower-case letters, digits and '-', "
            "starting with a letter and not ending with '-'"
        )
    return None


def scoped_name(*parts: str, max_length: int = 63) -> str:
    """A resource name made of parts joined by '-', unique as long as the parts are: when it
    would be too long, the end of the first part gives way to a short hash of the whole."""
    name = "-".join(parts)
    if len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    rest = "-".join(parts[1:])
    head = parts[0][: max(1, max_length - len(rest) - len(digest) - 2)].rstrip("-")
    return f"{head}-{digest}-{rest}"[:max_length].rstrip("-")


def default_bucket(project: str, cluster: str, role: str) -> str:
    """The name of a cluster's bucket (data, checkpoints) where the config names none."""
    return f"{project}-{cluster}-{role}"


def is_region(value: str) -> bool:
    return bool(_REGION.match(value))


# GKE's predefined general-purpose families: the CPU pools run controllers, not training.
# https://cloud.google.com/compute/docs/general-purpose-machines
_GENERAL_MACHINE = re.compile(r"^(e2|n1|n2|n2d|n4|c2|c2d|c3|c3d|c4|t2d)-(standard|highmem|highcpu)-[0-9]+$")


def general_machine_problem(value: str) -> str | None:
    if _GENERAL_MACHINE.match(value):
        return None
    return (
        "must be a general-purpose type <family>-<standard|highmem|highcpu>-<vCPUs>, "
        "family one of e2, n1, n2, n2d, n4, c2, c2d, c3, c3d, c4, t2d (e.g. e2-standard-4)"
    )


def region_of_zone(value: str) -> str | None:
    """The region of a zone name (`us-central1-c` → `us-central1`); None if it is not a zone name."""
    match = _ZONE.match(value)
    return match.group("region") if match else None


# "Each resource can have up to 64 labels." https://cloud.google.com/resource-manager/docs/labels-overview
MAX_LABELS = 64


def label_key_problem(key: str) -> str | None:
    return None if _LABEL_KEY.match(key) else "label keys are 1-63 of a-z, 0-9, '_', '-', starting with a letter"


def label_value_problem(value: str) -> str | None:
    return None if _LABEL_VALUE.match(value) else "label values are 0-63 of a-z, 0-9, '_', '-'"


def bucket_name_problem(name: str) -> str | None:
    """What breaks Cloud Storage's bucket naming rules (https://cloud.google.com/storage/docs/buckets#naming)."""
    components = name.split(".")
    if not _BUCKET_CHARACTERS.match(name):
        return "must use only a-z, 0-9, '-', '_' and '.', and start and end with a letter or digit"
    if len(name) > (222 if len(components) > 1 else 63) or len(name) < 3:
        return "must be 3-63 characters (up to 222 with dots)"
    if any(not part or len(part) > 63 for part in components):
        return "each dot-separated part must be 1-63 characters"
    try:
        ipaddress.IPv4Address(name)
        return "must not be an IP address"
    except ValueError:
        pass
    if name.startswith("goog") or _GOOGLE_LOOKALIKE.search(name):
        return "must not start with 'goog' or contain 'google' or a look-alike"
    return None


# Every subnet's primary range loses its first two and last two addresses.
# https://cloud.google.com/vpc/docs/subnets#unusable-ip-addresses-in-every-subnet
SUBNET_RESERVED_ADDRESSES = 4
# The GPU block is cut into this many equal subnets, one per GPU network; the most any machine
# needs is 9 (A3 Ultra and A4: a gVNIC network and 8 RDMA subnets).
GPU_SUBNETS = 16


# GKE gives every node a pod range of the power of two at or above twice its maximum pods (at
# least a /28), and a Standard cluster's node pools take 110 pods per node unless they say.
# https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr ("Pod CIDR range per
# node": 8 pods /28, 9-16 /27, 17-32 /26, 33-64 /25, 65-128 /24, 129-256 /23)
GKE_DEFAULT_MAX_PODS_PER_NODE = 110
MIN_POD_RANGE_PER_NODE = 16


def pod_range_per_node(max_pods: int) -> int:
    """Pod addresses GKE reserves for one node that holds at most `max_pods` pods."""
    return max(MIN_POD_RANGE_PER_NODE, 1 << (2 * max_pods - 1).bit_length())


def usable_addresses(cidr: str) -> int:
    """Addresses a subnet of this primary range gives to nodes."""
    return ipaddress.IPv4Network(cidr).num_addresses - SUBNET_RESERVED_ADDRESSES


def gpu_subnet_prefix(gpu_cidr: str) -> int:
    """The prefix length of each of the GPU_SUBNETS subnets of a GPU block."""
    return ipaddress.IPv4Network(gpu_cidr).prefixlen + (GPU_SUBNETS - 1).bit_length()


def reservation_path(project: str, reservation: str, block: str | None) -> str:
    """A specific reservation (or one block of it) as node pools name it.
    https://cloud.google.com/compute/docs/instances/reservations-consume#consuming_a_specific_shared_reservation"""
    path = f"projects/{project}/reservations/{reservation}"
    return f"{path}/reservationBlocks/{block}" if block else path


# --------------------------------------------------------------------------- Filestore


class FilestoreTier(StrEnum):
    BASIC_HDD = "BASIC_HDD"
    BASIC_SSD = "BASIC_SSD"
    ZONAL = "ZONAL"
    REGIONAL = "REGIONAL"
    ENTERPRISE = "ENTERPRISE"


# Provisionable capacity per tier: (min GiB, max GiB, step GiB) ranges.
# https://cloud.google.com/filestore/docs/service-tiers
FILESTORE_CAPACITY = MappingProxyType(
    {
        "BASIC_HDD": ((1024, 65433, 1),),
        "BASIC_SSD": ((2560, 65433, 1),),
        "ZONAL": ((1024, 9984, 256), (10240, 102400, 2560)),
        "REGIONAL": ((1024, 9984, 256), (10240, 102400, 2560)),
        "ENTERPRISE": ((1024, 10240, 256),),
    }
)
# Tiers whose instances live in a region rather than a zone.
REGIONAL_FILESTORE_TIERS = frozenset({FilestoreTier.REGIONAL, FilestoreTier.ENTERPRISE})


def filestore_capacity_problem(tier: str, capacity_gib: int) -> str | None:
    ranges = FILESTORE_CAPACITY[tier]
    if any(low <= capacity_gib <= high and (capacity_gib - low) % step == 0 for low, high, step in ranges):
        return None
    allowed = " or ".join(
        f"{low}-{high} GiB" + (f" in steps of {step} GiB" if step > 1 else "") for low, high, step in ranges
    )
    return f"tier {tier} allows {allowed}"
