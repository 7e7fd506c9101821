"""Compare harness.stackfile with the Pulumi CLI's own code on a corpus of stack files.

`python -m integration.stackfile_check` writes every stack file the project ships and a generated
corpus (each scalar form YAML and Go tell apart, placed at the top and inside an object, and the
structures Pulumi treats specially) to a temporary folder, reads them with the binary that
integration/wrappers/pulumi-config builds from github.com/pulumi/pulumi/sdk at the CLI's version and
with `harness.stackfile.cli_reading`, and prints every file on which they disagree. Exit code 1 on any
disagreement. tests/integration/test_stackfile_cli.py runs it (`make integration`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from facts.project import PROJECT
from harness.runner import ROOT
from harness.stackfile import StackFileError, cli_reading, holds_secret
from integration.controlplane import binary

# Plain scalars whose reading differs between YAML 1.1, YAML 1.2 and Go's parsers.
SCALARS = (
    # integers: signs, Go's base prefixes, YAML 1.1 octals, underscores, int64 and uint64 bounds
    "0", "00", "010", "08", "09", "0_10", "1_000", "1__0", "_1", "+12", "-12", "+0", "-0", "0x1F", "0X1f",
    "-0x1A", "0b101", "0B11", "-0b11", "0o17", "0O17", "-0o17", "0o8", "0x", "0b", "9223372036854775807",
    "9223372036854775808", "18446744073709551615", "18446744073709551616", "-9223372036854775808",
    "-9223372036854775809", "12345678901234567890123",
    # floats
    "1.5", "1.50", "1.", ".5", "-.5", "+.5", "1e3", "1E3", "1e-7", "1.5e300", "1e400", "-1e400", "1.0",
    "0.000001", "0.0000001", "1e21", "1e20", "123456789012345678.0", "3.14159265358979", ".5e3", "1_000.5",
    "1.5_0", "+.5e+3", "1_0e3", "0x1p-2", "1e", "e3",
    # words YAML 1.1 read as booleans or nulls
    "true", "True", "TRUE", "tRue", "false", "yes", "no", "on", "off", "y", "n", "Yes", "ON", "~", "null",
    "Null", "NULL", "NaN", "Infinity", "inf", "nan",
    # times, sexagesimals and look-alikes
    "1:30", "12:30:45", "1:2:3.5", "0:0", "2026-13-01", "2026-02-30", "2026-02-29", "2024-02-29", "2026-1-2",
    "2026-01-02", "2026-01-02T10:00:00Z", "2026-01-02t10:00:00Z", "2026-01-02T10:00:00z",
    "2026-01-02T10:00:00+02:00", "2026-01-02T10:00:00-05:30", "2026-01-02T10:00:00+00:00",
    "2026-01-02T10:00:00.5Z", "2026-01-02T10:00:00,25Z", "2026-01-02T10:00:00.123456789123Z",
    "2026-01-02T10:00:00.000Z", "2026-01-02 10:00:00", "2026-01-02 10:00:00.25", "2026-01-02T10:00:00",
    "2026-01-02 10:00:00Z", "2026-01-02T24:00:00Z", "2026-01-02T1:2:3Z", "2026-01-02T10:00Z", "20260102",
    "0001-01-01", "0000-02-29", "12-01-01",
    # everyday values of this project
    "us-central1-c", "a3-highgpu-8g", "10.0.0.0/8", "10.0.0.1", "1.2.3", "-", "+", "0.0.0.0/0", "gpt-5b",
)  # fmt: skip

# Values that Pulumi refuses to write as JSON, so the CLI refuses the whole file.
NON_JSON = (".nan", ".NaN", ".inf", "-.inf", "+.INF")


def corpus() -> Iterator[tuple[str, str]]:
    """(name, text) pairs: the shipped stack files, then the generated cases."""
    for path in sorted([*ROOT.glob("Pulumi.*.yaml"), *(ROOT / "examples").glob("Pulumi.*.yaml")]):
        yield path.name, path.read_text()
    for i, scalar in enumerate((*SCALARS, *NON_JSON)):
        yield (
            f"scalar-{i}",
            f"config:\n  {PROJECT}:top: {scalar}\n  {PROJECT}:nested:\n    v: {scalar}\n    l: [{scalar}]\n",
        )
        yield f"quoted-{i}", f"config:\n  {PROJECT}:top: '{scalar}'\n  {PROJECT}:tagged: !!str {scalar}\n"
    yield from STRUCTURES.items()


STRUCTURES = {
    "empty": "",
    "config-empty": "config:\n",
    "config-list": "config: []\n",
    "config-scalar": "config: x\n",
    "document-list": "- config\n",
    "outside": f"{PROJECT}:zone: x\nconfig:\n  {PROJECT}:a: 1\n",
    "bare": "config:\n  zone: us-east5-a\n",
    "compat": f"config:\n  {PROJECT}:config:zone: us-east5-a\n",
    "three-colons": f"config:\n  {PROJECT}:a:b: 1\n",
    "four-colons": f"config:\n  {PROJECT}:a:b:c: 1\n",
    "empty-namespace": "config:\n  :zone: 1\n",
    "empty-name": f"config:\n  '{PROJECT}:': 1\n",
    "number-key": "config:\n  123: 1\n",
    "duplicate": f"config:\n  {PROJECT}:a: 1\n  {PROJECT}:a: 2\n",
    "duplicate-nested": f"config:\n  {PROJECT}:a:\n    x: 1\n    x: 2\n",
    "duplicate-in-list": f"config:\n  {PROJECT}:a:\n  - {{x: 1, x: 1}}\n",
    "duplicate-by-text": f"config:\n  {PROJECT}:a: {{1: a, '1': b}}\n",
    "keys-of-other-types": f"config:\n  {PROJECT}:a: {{1: a, true: b, 1.5: c, null: d}}\n",
    "secure-top": f"config:\n  {PROJECT}:kubeconfig:\n    secure: AAABBB\n",
    "secure-nested": (
        f"config:\n  {PROJECT}:training:\n    runs:\n    - name: r\n      env:\n"
        "        HF_TOKEN:\n          secure: AAAB\n"
    ),
    "secure-in-list": f"config:\n  {PROJECT}:a: [1, {{secure: AA}}, {{secure: AA, x: 1}}, {{secure: 5}}]\n",
    "merge": f"config:\n  {PROJECT}:x: &a {{k: 1}}\n  {PROJECT}:y: *a\n  {PROJECT}:z: {{<<: [*a, {{j: 2}}], k: 3}}\n",
    "merge-order": (
        f"config:\n  {PROJECT}:a: {{<<: {{x: 1}}, x: 2}}\n  {PROJECT}:b: {{x: 2, <<: {{x: 1}}}}\n"
        f"  {PROJECT}:c: {{<<: [{{x: 1}}, {{x: 3, y: 2}}]}}\n"
    ),
    "merge-into-config": (
        f"config:\n  <<: [{{{PROJECT}:a: 1, {PROJECT}:b: 1}}, {{{PROJECT}:b: 2, c: 2}}]\n  {PROJECT}:a: 3\n"
    ),
    "merge-anchor-into-config": f"x: &v {{{PROJECT}:a: 1}}\nconfig:\n  <<: *v\n",
    "merge-scalar-into-config": "config:\n  <<: 5\n",
    "anchored-run": (
        f"config:\n  {PROJECT}:training:\n    runs:\n    - &base {{name: a, model: gpt-5b, nodes: 2, steps: 010}}\n"
        "    - {<<: *base, name: b}\n"
    ),
    "tags": (
        f"config:\n  {PROJECT}:a: !!float 1\n  {PROJECT}:b: !!bool true\n  {PROJECT}:c: !!null ''\n"
        f"  {PROJECT}:d: !!int '12'\n  {PROJECT}:e: !!binary aGVsbG8=\n  {PROJECT}:f: !custom x\n"
    ),
    "tag-mismatch": f"config:\n  {PROJECT}:a: !!int abc\n",
    "block-scalars": f"config:\n  {PROJECT}:a: |\n    line1\n    line2\n  {PROJECT}:b: >\n    folded\n    text\n",
    "null-values": f"config:\n  {PROJECT}:a:\n  {PROJECT}:b: ~\n  {PROJECT}:c: {{x: null}}\n",
    "not-yaml": f"config:\n  {PROJECT}:a: [1, 2\n",
    "byte-order-mark": f"\ufeffconfig:\n  {PROJECT}:a: 1\n",
    "secrets-provider": f"secretsprovider: passphrase\nencryptionsalt: v1:abc\nconfig:\n  {PROJECT}:a: 1\n",
}


def ours(text: str) -> dict[str, Any]:
    try:
        values = cli_reading(text, PROJECT)
    except StackFileError as error:
        return {"error": str(error)}
    secret = sorted(key for key, value in values.items() if holds_secret(_decoded(value)))
    return {"values": values, "secretKeys": secret}


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def agree(cli: dict[str, Any], mine: dict[str, Any]) -> bool:
    """Both refuse, or both hand the program the same values: scalars as the same text, objects and
    lists as the same JSON, and the same keys secret."""
    if "error" in cli or "error" in mine:
        return "error" in cli and "error" in mine
    theirs, own = cli.get("values", {}), mine["values"]
    if set(theirs) != set(own) or sorted(cli.get("secretKeys", [])) != mine["secretKeys"]:
        return False
    for key, text in theirs.items():
        if text.startswith(("{", "[")):
            if _decoded(text) != _decoded(own[key]):
                return False
        elif text != own[key]:
            return False
    return True


Disagreement = tuple[str, dict[str, Any], dict[str, Any]]


def compare(oracle: Path) -> tuple[int, list[Disagreement]]:
    """How many cases were read, and (name, the CLI's reading, ours) for each on which the CLI's
    config reader `oracle` and harness.stackfile disagree."""
    cases = list(corpus())
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i, (_, text) in enumerate(cases):
            path = Path(folder) / f"Pulumi.case{i}.yaml"
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        result = subprocess.run([str(oracle), PROJECT, *paths], capture_output=True, text=True, check=True)
    readings = [json.loads(line) for line in result.stdout.splitlines()]
    disagreements = [
        (name, cli, mine)
        for (name, text), cli in zip(cases, readings, strict=True)
        if not agree(cli, mine := ours(text))
    ]
    return len(cases), disagreements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--oracle", type=Path, help="the CLI's config reader (default: the one `make integration-tools` builds)"
    )
    args = parser.parse_args(argv)
    count, disagreements = compare(args.oracle or binary("pulumi-config"))
    for name, cli, mine in disagreements:
        print(f"{name}:\n  the CLI: {json.dumps(cli)}\n  ours:    {json.dumps(mine)}")
    print(f"stack files read as the Pulumi CLI reads them: {count - len(disagreements)} of {count}")
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
