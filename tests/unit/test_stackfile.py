"""Stack files read as the Pulumi CLI reads them (harness/stackfile.py).

Every expected text below is what the CLI's own code (github.com/pulumi/pulumi/sdk v3.259.0:
workspace.LoadProjectStack, then config.Map.Decrypt) handed the program for the same file;
`make integration` compares the two again on the whole corpus of integration/stackfile_check.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from facts.project import PROJECT
from facts.pulumi_cli import SECRET_STAND_IN, rounded_by_config
from harness.runner import run_stack
from harness.stackfile import StackFileError, cli_reading, parse_stack_file
from integration.stackfile_check import STRUCTURES, ours
from tools import render as render_cli

SHIPPED = sorted(
    [*Path(render_cli.ROOT).glob("Pulumi.*.yaml"), *(Path(render_cli.ROOT) / "examples").glob("Pulumi.*.yaml")]
)


def top(scalar: str) -> str:
    return cli_reading(f"config:\n  {PROJECT}:v: {scalar}\n", PROJECT)[f"{PROJECT}:v"]


def nested(scalar: str) -> object:
    return json.loads(cli_reading(f"config:\n  {PROJECT}:v: {{x: {scalar}}}\n", PROJECT)[f"{PROJECT}:v"])["x"]


@pytest.mark.parametrize(
    ("scalar", "text"),
    [
        # gopkg.in/yaml.v3 resolve.go: YAML 1.1 octals kept "for compatibility"; Go's base prefixes.
        ("010", "8"),
        ("0_10", "8"),
        ("08", "8"),  # not octal: ParseInt fails, the float pattern reads 8
        ("0x1F", "31"),
        ("0o17", "15"),
        ("0B11", "3"),
        ("1_000", "1000"),
        ("+12", "12"),
        # floats come back as Go's encoding/json writes them: integral ones without a fraction
        ("1e3", "1000"),
        ("1.50", "1.5"),
        ("1.0", "1"),
        ("1e21", "1e+21"),
        ("1e-7", "1e-7"),
        ("0.000001", "0.000001"),
        ("1e400", "1e400"),  # Go's ParseFloat overflows: the text stays a string
        # YAML 1.2: no sexagesimals, no yes/no/on/off booleans
        ("1:30", "1:30"),
        ("yes", "yes"),
        ("on", "on"),
        ("True", "true"),
        ("~", ""),
        # timestamps become Go's time.Time.String() (config/object.go: `v.String()`)
        ("2026-01-02T10:00:00Z", "2026-01-02 10:00:00 +0000 UTC"),
        ("2026-1-2", "2026-01-02 00:00:00 +0000 UTC"),
        ("2026-01-02 10:00:00.25", "2026-01-02 10:00:00.25 +0000 UTC"),
        ("2026-01-02T10:00:00+02:00", "2026-01-02 10:00:00 +0200 +0200"),
        ("2026-02-30", "2026-02-30"),  # no such day: a string
        ("2026-01-02T10:00:00", "2026-01-02T10:00:00"),  # no zone after T: a string
        ("'010'", "010"),
        ("!!str 010", "010"),
        ("9223372036854775808", "9223372036854775808"),
    ],
)
def test_a_top_level_scalar_reaches_the_program_as_the_cli_writes_it(scalar: str, text: str) -> None:
    assert top(scalar) == text


def test_inside_an_object_numbers_keep_json_types_and_big_integers_become_floats() -> None:
    assert nested("010") == 8 and nested("1e3") == 1000 and nested("~") is None and nested("yes") == "yes"
    assert nested("9223372036854775808") == 9223372036854776000  # config/object.go holds it as a float64
    assert nested("2026-01-02T10:00:00Z") == "2026-01-02 10:00:00 +0000 UTC"


def test_merge_keys_anchors_and_nested_secure_values() -> None:
    values = {k: json.loads(v) for k, v in cli_reading(STRUCTURES["merge-order"], PROJECT).items()}
    assert values == {f"{PROJECT}:a": {"x": 2}, f"{PROJECT}:b": {"x": 2}, f"{PROJECT}:c": {"x": 1, "y": 2}}
    runs = json.loads(cli_reading(STRUCTURES["anchored-run"], PROJECT)[f"{PROJECT}:training"])["runs"]
    assert runs[1] == {"name": "b", "model": "gpt-5b", "nodes": 2, "steps": 8}
    read = parse_stack_file(STRUCTURES["secure-nested"], "Pulumi.s.yaml", PROJECT)
    assert read.values[f"{PROJECT}:training"]["runs"][0]["env"] == {"HF_TOKEN": SECRET_STAND_IN}
    assert read.secret_keys == (f"{PROJECT}:training",), "a nested secure leaf makes its whole key secret"
    mixed = json.loads(cli_reading(STRUCTURES["secure-in-list"], PROJECT)[f"{PROJECT}:a"])
    assert mixed == [1, SECRET_STAND_IN, {"secure": "AA", "x": 1}, {"secure": 5}]


def test_a_merge_key_under_config_merges_as_the_cli_merges_it() -> None:
    """It was read as a key `nemo-gke:<<`, with the advice to write that key."""
    values = cli_reading(STRUCTURES["merge-into-config"], PROJECT)
    assert values == {f"{PROJECT}:a": "3", f"{PROJECT}:b": "1", f"{PROJECT}:c": "2"}, (
        "own keys win, then the first merged"
    )
    assert cli_reading(STRUCTURES["merge-anchor-into-config"], PROJECT) == {f"{PROJECT}:a": "1"}
    with pytest.raises(StackFileError, match="map merge requires map or sequence of maps"):
        cli_reading(STRUCTURES["merge-scalar-into-config"], PROJECT)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("duplicate", "Pulumi.x.yaml:3: mapping key 'nemo-gke:a' already defined at line 2"),
        ("duplicate-by-text", "mapping key '1' already defined at line 2"),
        ("four-colons", "cannot parse 'nemo-gke:a:b:c' as a configuration key"),
        ("three-colons", "cannot parse 'nemo-gke:a:b' as a configuration key"),
        ("number-key", "cannot parse '123' as a configuration key"),
        ("config-list", "Pulumi.x.yaml:1: `config:` must map keys to values (the Pulumi CLI refuses a list here)"),
        ("not-yaml", "Pulumi.x.yaml:3: not YAML:"),
        ("tag-mismatch", "cannot decode 'abc' as a !!int"),
        ("scalar-nan", "is not a number JSON can hold"),
    ],
)
def test_what_the_cli_refuses_is_refused_with_the_line(case: str, message: str) -> None:
    text = f"config:\n  {PROJECT}:a: .nan\n" if case == "scalar-nan" else STRUCTURES[case]
    with pytest.raises(StackFileError) as refused:
        parse_stack_file(text, "Pulumi.x.yaml", PROJECT)
    assert message in str(refused.value)
    assert "error" in ours(text), "the CLI's reading refuses it too"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "config:\n  zone: us-east5-a\n",
            "Pulumi.x.yaml:2: config key 'zone' has no namespace: the Pulumi CLI reads it as 'nemo-gke:zone'; "
            "write `nemo-gke:zone`",
        ),
        (
            "nemo-gke:zone: us-east5-a\nconfig:\n  nemo-gke:project: p\n",
            "Pulumi.x.yaml:1: 'nemo-gke:zone' is outside `config:`, so the Pulumi CLI ignores it; move it under "
            "`config:`",
        ),
        ("cofnig:\n  nemo-gke:project: p\n", "'cofnig' is outside `config:`, so the Pulumi CLI ignores it"),
        (
            "config:\n  zone: a\n  nemo-gke:zone: b\n",
            "'nemo-gke:zone' and 'zone' are one key, 'nemo-gke:zone', to the Pulumi CLI, which keeps either",
        ),
    ],
    ids=["bare-key", "outside-config", "misspelt-config", "bare-and-namespaced"],
)
def test_what_the_cli_reads_other_than_it_looks_is_refused_with_its_reading_and_the_fix(
    text: str, message: str
) -> None:
    """The CLI namespaces a bare key with the project (workspace/loaders.go stackConfigNamespacedWithProject),
    keeps one of two spellings of a key at random (a Go map), and ignores what is outside `config:`
    (workspace/project.go ProjectStack): the render refuses each, naming the key and the fix."""
    with pytest.raises(StackFileError) as refused:
        parse_stack_file(text, "Pulumi.x.yaml", PROJECT)
    assert message in str(refused.value)


def test_an_octal_number_is_read_as_the_cli_reads_it_with_advice() -> None:
    read = parse_stack_file(STRUCTURES["anchored-run"], "Pulumi.x.yaml", PROJECT)
    assert read.values[f"{PROJECT}:training"]["runs"][0]["steps"] == 8
    assert read.advice == (
        "Pulumi.x.yaml:4: 010 is read by the Pulumi CLI as the octal number 8 (gopkg.in/yaml.v3 keeps YAML 1.1 "
        "octals); write 8, or quote '010' for text",
    )


def test_excessive_aliasing_and_self_reference_are_refused_in_bounded_time() -> None:
    laughs = "config:\n  nemo-gke:a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for previous in "abcdefgh":
        name = chr(ord(previous) + 1)
        laughs += f"  nemo-gke:{name}: &{name} [*{previous}, *{previous}, *{previous}, *{previous}, *{previous}]\n"
    with pytest.raises(StackFileError, match="excessive aliasing"):
        parse_stack_file(laughs, "Pulumi.x.yaml", PROJECT)
    with pytest.raises(StackFileError, match="contains itself"):
        parse_stack_file("config:\n  nemo-gke:a: &a {x: *a}\n", "Pulumi.x.yaml", PROJECT)


@pytest.mark.parametrize("depth", [101, 5000])
def test_a_document_nested_past_the_bound_is_refused_not_recursed_into(depth: int) -> None:
    """PyYAML's composer recurses per level: 5,000 levels ended in RecursionError."""
    flow = "config:\n  nemo-gke:a: " + "[" * depth + "]" * depth + "\n"
    block = "config:\n  nemo-gke:a:\n" + "".join("  " * (i + 2) + "- \n" for i in range(depth))
    for text in (flow, block):
        with pytest.raises(StackFileError, match="nested deeper than 100 levels"):
            parse_stack_file(text, "Pulumi.x.yaml", PROJECT)
    assert parse_stack_file("config:\n  nemo-gke:a: " + "[" * 90 + "]" * 90 + "\n", "Pulumi.x.yaml", PROJECT)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_stack_file_holds_nothing_the_cli_reads_other_than_it_looks(path: Path) -> None:
    assert parse_stack_file(path.read_text(), path.name, PROJECT).advice == ()


def test_render_reads_a_stack_file_anywhere_and_names_its_stack_from_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "elsewhere" / "Pulumi.mine.yaml"
    file.parent.mkdir()
    file.write_text((Path(render_cli.ROOT) / "Pulumi.dev.yaml").read_text())
    assert render_cli.main(["--file", str(file), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "mine" / "summary.md").read_text().startswith("# Go/no-go: stack mine")
    assert render_cli.main(["--file", str(file), "--stack", "other", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "other" / "summary.md").is_file()
    capsys.readouterr()


def test_a_run_only_stack_file_finds_its_upstream_beside_it(tmp_path: Path) -> None:
    examples = Path(render_cli.ROOT) / "examples"
    for name in ("Pulumi.run-llama8b.yaml", "Pulumi.a3high-small.yaml"):
        (tmp_path / name).write_text((examples / name).read_text().replace("your-gcp-project", "beside-project"))
    run = run_stack("run-llama8b", file=tmp_path / "Pulumi.run-llama8b.yaml")
    assert run.exports["summary"]["project"] == "beside-project", "the upstream came from the file beside it"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stack", "../x"], "--stack: '../x' may only contain alphanumeric, hyphens, underscores, or periods"),
        (["--stack", ""], "--stack: '' must be 1 to 100 characters"),
        (["--file", "/nonexistent/Pulumi.x.yaml"], "--file: /nonexistent/Pulumi.x.yaml is not a file"),
        (["--file", "a\0b"], "--file: 'a\\x00b' is not a file"),
    ],
)
def test_a_bad_argument_gets_one_line_and_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render_cli.main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {message}") and error.count("\n") == 1, error


def test_a_file_not_named_as_a_stack_needs_a_stack_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "stack.yaml"
    file.write_text("config: {}\n")
    assert render_cli.main(["--file", str(file)]) == 2
    assert "--file: stack.yaml is not named Pulumi.<stack>.yaml; name the stack with --stack" in capsys.readouterr().err


def test_out_never_deletes_what_the_render_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    mine = out / "dev" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("my notes")
    assert render_cli.main(["--stack", "dev", "--out", str(out)]) == 2
    assert "--out: " in capsys.readouterr().err and mine.read_text() == "my notes"

    mine.unlink()
    assert render_cli.main(["--stack", "dev", "--out", str(out)]) == 0
    written = (out / "dev" / render_cli.WRITTEN).read_text().splitlines()
    assert "summary.md" in written and any(line.startswith("kubernetes/") for line in written)
    stale = out / "dev" / "kubernetes" / "999-stale.yaml"
    stale.write_text("kind: Stale\n")
    (out / "dev" / render_cli.WRITTEN).write_text("\n".join([*written, "../../escape.txt"]) + "\n")
    escape = tmp_path / "escape.txt"
    escape.write_text("outside")
    assert render_cli.main(["--stack", "dev", "--out", str(out)]) == 0
    assert escape.read_text() == "outside", "a listed path outside the folder is never removed"
    assert stale.exists(), "a file the render did not list is kept"
    capsys.readouterr()


def test_out_never_writes_through_a_link_placed_in_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A link in the folder named like a file the render writes had it overwrite the link's target."""
    out = tmp_path / "out"
    assert render_cli.main(["--stack", "dev", "--out", str(out)]) == 0
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (out / "dev" / "summary.md").unlink()
    (out / "dev" / "summary.md").symlink_to(target)
    assert render_cli.main(["--stack", "dev", "--out", str(out)]) == 2
    assert "is a symbolic link" in capsys.readouterr().err and target.read_text() == "keep me"


def test_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "dev").write_text("a file")
    assert render_cli.main(["--stack", "dev", "--out", str(out)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "nemo-gke:cluster: {maintenanceWindow: {startTime: 2026-01-04T03:00:00Z, endTime: 2026-01-04T11:00:00Z}}",
            'nemo-gke:cluster.maintenanceWindow.startTime = "2026-01-04 03:00:00 +0000 UTC": is how the Pulumi CLI '
            "passes on an unquoted timestamp: quote it in the stack file ('2026-01-04T03:00:00Z')",
        ),
        (
            "nemo-gke:production: yes",
            'nemo-gke:production = "yes": must be true or false: the Pulumi CLI reads YAML 1.2, in which this word '
            "is text",
        ),
        (
            "nemo-gke:training: {runs: [{name: a, model: gpt-5b, nodes: 2, steps: 1:30}]}",
            'nemo-gke:training.runs[0].steps = "1:30": Input should be a valid integer',
        ),
    ],
    ids=["unquoted-timestamp", "yaml-1.1-boolean", "sexagesimal"],
)
def test_a_value_the_cli_reads_as_yaml_1_2_gets_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    """The same line reaches `pulumi up`: the program, not only the render, names the fix."""
    file = tmp_path / "Pulumi.h.yaml"
    file.write_text(f"config:\n  nemo-gke:project: my-project-123\n  {line}\n")
    assert render_cli.main(["--file", str(file), "--out", str(tmp_path / "out")]) == 2
    assert f"  {message}\n" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "rounded"),
    [(-(2**63), False), (2**63 - 1, False), (2**63, True), (-(2**63) - 1, True), (1e20, True), (1.5e20, True),
     (3.0, False), (True, False), ("9" * 30, False)],
)  # fmt: skip
def test_only_a_whole_number_beyond_int64_is_said_to_be_rounded(value: object, rounded: bool) -> None:
    """int64 spans -2**63 to 2**63 - 1; the CLI holds only a number beyond it as a float64."""
    assert rounded_by_config(value) is rounded
