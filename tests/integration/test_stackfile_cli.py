"""Stack files read as the Pulumi CLI reads them: harness.stackfile against the CLI's own config
reader (built from github.com/pulumi/pulumi/sdk by `make integration-tools`) on every shipped
stack file and a generated corpus of YAML forms (integration/stackfile_check.py)."""

from __future__ import annotations

import json

from integration.controlplane import binary
from integration.stackfile_check import compare


def test_every_stack_file_reads_as_the_pulumi_cli_reads_it() -> None:
    count, disagreements = compare(binary("pulumi-config"))
    shown = [f"{name}: the CLI {json.dumps(cli)}, ours {json.dumps(ours)}" for name, cli, ours in disagreements]
    assert shown == []
    print(f"stack files read as the Pulumi CLI reads them: {count} of {count}")
