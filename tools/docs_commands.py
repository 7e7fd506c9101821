"""Every shell command of the docs runs as written, or says why it cannot here.

The commands are the lines of the fenced `sh`/`bash`/`shell` blocks of README.md and docs/*.md, and
the `$ ` lines of their `console` blocks (with the output shown under them, and an `# exit code N`
comment where it is not 0). Each is classified (`classify`): run offline on a fresh copy of the
checkout, or not run, with the reason (a cloud, a cluster, the Pulumi CLI, Go). A command of a
form not known here is an error: tests/repo/test_docs.py fails on it.

`python -m tools.docs_commands --run` (`make docs-check`) copies the checkout (tracked and new
files, nothing ignored) into a temporary folder with no `../shared` beside it, runs `make install`
there, then every other command that runs offline, once each, in the order the docs give them,
and compares the exit code and, in console blocks, what it prints with what the docs show
(`…` stands for any lines, a line ending in ` …` for any line that begins so).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.runner import ROOT

SHELL_BLOCKS = ("sh", "bash", "shell")
CONSOLE_BLOCK = "console"


@dataclass(frozen=True)
class DocCommand:
    page: str
    line: int
    # As a shell reads it: continuation lines joined, the comment kept.
    text: str
    exit_code: int
    # What a console block shows it printing (stderr, then stdout); None in a shell block.
    shown: tuple[str, ...] | None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_commands(text: str, page: str = "") -> Iterator[DocCommand]:
    """The commands of a Markdown page's fenced shell and console blocks."""
    lines = text.splitlines()
    block: str | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith("```"):
            block = line[3:].strip() if block is None else None
            continue
        console = block == CONSOLE_BLOCK and line.startswith("$ ")
        if not (console or (block in SHELL_BLOCKS and line.strip() and not line.lstrip().startswith("#"))):
            continue
        start = index
        command = line[2:] if console else line
        while command.endswith("\\") and index < len(lines):
            command = command[:-1] + lines[index]
            index += 1
        shown: list[str] | None = None
        if console:
            shown = []
            while index < len(lines) and not lines[index].startswith(("$ ", "```")):
                shown.append(lines[index])
                index += 1
        match = re.search(r"#\s*exit code (\d+)\s*$", command)
        yield DocCommand(
            page, start, command, int(match.group(1)) if match else 0, tuple(shown) if shown is not None else None
        )


def bare_block_commands(text: str) -> list[int]:
    """Lines of fenced blocks without a shell language that look like commands (`$ …`): such a
    command would escape both the check and the classification."""
    found, block = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            block = line[3:].strip() if block is None else None
        elif block is not None and block not in (*SHELL_BLOCKS, CONSOLE_BLOCK) and line.startswith("$ "):
            found.append(number)
    return found


def shown_pattern(shown: tuple[str, ...]) -> str:
    parts = []
    for line in shown:
        if line == "…":
            parts.append(r"(?:[^\n]*\n)*?")
        elif line.endswith(" …"):
            parts.append(re.escape(line[:-2]) + r"[^\n]*\n")
        else:
            parts.append(re.escape(line) + r"\n")
    return "".join(parts)


def prints_as_shown(command: DocCommand, printed: str) -> bool:
    if not command.shown:
        return True
    return re.fullmatch(shown_pattern(command.shown), printed.rstrip("\n") + "\n") is not None


# ----------------------------------------------------------------------------- classification


@dataclass(frozen=True)
class Verdict:
    run: bool
    why: str


# Programs that need what a fresh clone offline does not have.
_NEEDS = {
    "pulumi": "needs the Pulumi CLI and a backend (and Google Cloud credentials to preview, deploy or destroy)",
    "gcloud": "needs the Google Cloud SDK and credentials",
    "kubectl": "needs a running cluster and its credentials",
}
_LANE = (
    "needs the integration lane's binaries, built from Go modules by `make integration-tools` (16 min cold); CI runs it"
)
_MAKE = {
    "install": Verdict(True, "offline"),
    "render": Verdict(True, "offline"),
    "docs": Verdict(True, "offline"),
    "bench": Verdict(True, "offline"),
    "test": Verdict(
        False, "recursive: `make test` runs tests/repo/test_docs.py, which checks these commands; CI runs it"
    ),
    "docs-check": Verdict(False, "recursive: this check itself"),
    "integration": Verdict(False, _LANE),
    "integration-engine": Verdict(False, _LANE),
    "integration-tools": Verdict(False, _LANE),
    "gpu-train": Verdict(False, "needs an NVIDIA GPU"),
}
_PYTHON_MODULES = {
    "tools.render": Verdict(True, "offline"),
    "tools.docs": Verdict(True, "offline"),
    "analysis": Verdict(True, "offline, on examples/logs"),
    "analysis.samples": Verdict(True, "offline"),
    "tools.waiting": Verdict(False, "needs a running cluster and its credentials"),
    "integration.lane": Verdict(False, _LANE),
    "integration.engine": Verdict(False, _LANE),
    "integration.stackfile_check": Verdict(False, _LANE),
}


def _programs(text: str) -> list[list[str]]:
    """The words of each simple command in `text`, command substitutions included."""
    words = shlex.split(text.replace("$(", " ( ").replace(")", " ) "), comments=True, posix=True)
    commands: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", "|", ";", "(", ")") or word.startswith((">", "2>")):
            commands.append([])
        elif not (commands[-1] and commands[-1][-1] in (">", "2>")):
            commands[-1].append(word)
    return [c for c in commands if c]


class UnknownCommand(ValueError):
    """A documented command of a form this check does not know."""


def classify(command: DocCommand) -> Verdict:
    """Whether a documented command runs offline on a fresh clone, and if not, why."""
    programs = _programs(command.text)
    for words in programs:
        if words[0] in _NEEDS:
            return Verdict(False, _NEEDS[words[0]])
    verdicts = [_offline(words) for words in programs]
    unknown = [" ".join(words) for words, verdict in zip(programs, verdicts, strict=True) if verdict is None]
    if unknown or not verdicts:
        raise UnknownCommand(
            f"{command.where}: `{command.text}`: {', '.join(unknown) or 'no command'} is none of the forms "
            "tools/docs_commands.py knows; classify it there"
        )
    skipped = [v for v in verdicts if v is not None and not v.run]
    return skipped[0] if skipped else Verdict(True, "offline")


def _offline(words: list[str]) -> Verdict | None:
    program, args = words[0], words[1:]
    if program == "make" and args:
        targets = [a for a in args if "=" not in a]
        if len(targets) == 1 and all(re.fullmatch(r"STACK=[A-Za-z0-9_.-]+", a) for a in args if "=" in a):
            return _MAKE.get(targets[0])
        return None
    if program == "python" and len(args) >= 2 and args[0] == "-m":
        return _PYTHON_MODULES.get(args[1])
    if program in (".", "source") and args == [".venv/bin/activate"]:
        return Verdict(True, "offline")
    if program == "cp" and len(args) == 2 and args[0].startswith("examples/") and args[1] == ".":
        return Verdict(True, "offline")
    if program == "cp" and len(args) == 2 and all("/.pulumi/stacks/" in a for a in args):
        return Verdict(False, "repairs the state of your own file:// backend")
    return None


# ----------------------------------------------------------------------------- the check


def doc_pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def all_commands(root: Path = ROOT) -> list[DocCommand]:
    return [c for page in doc_pages(root) for c in doc_commands(page.read_text(), str(page.relative_to(root)))]


def fresh_copy(root: Path, into: Path) -> Path:
    """The checkout's tracked and new files (nothing git ignores), as a fresh clone would hold them."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    copy = into / root.name
    for name in filter(None, listed.split("\0")):
        source = root / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def run_all(root: Path = ROOT) -> int:
    started = time.monotonic()
    commands = all_commands(root)
    to_run: dict[str, DocCommand] = {}
    skipped: dict[str, list[DocCommand]] = {}
    for command in commands:
        verdict = classify(command)
        if verdict.run:
            to_run.setdefault(command.text, command)
        else:
            skipped.setdefault(verdict.why, []).append(command)
    ordered = sorted(to_run.values(), key=lambda c: not c.text.startswith("make install"))
    failures = 0
    with tempfile.TemporaryDirectory(prefix="nemo-gke-docs-") as folder:
        copy = fresh_copy(root, Path(folder))
        env = {k: v for k, v in os.environ.items() if k not in ("NEMO_SHARED_DIR", "VIRTUAL_ENV", "PYTHONPATH")}
        env["PATH"] = f"{copy / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        pages = {page: page.read_text() for page in doc_pages(copy)}
        print(
            f"docs-check: {len(commands)} commands in {len(pages)} pages; running {len(ordered)} in {copy}", flush=True
        )
        for command in ordered:
            began = time.monotonic()
            done = subprocess.run(
                ["bash", "-c", command.text], check=False, cwd=copy, env=env, capture_output=True, text=True
            )
            took = time.monotonic() - began
            problem = ""
            if done.returncode != command.exit_code:
                problem = f"exit code {done.returncode}, the docs say {command.exit_code}"
            elif not prints_as_shown(command, done.stderr + done.stdout):
                problem = "prints other than the docs show"
            print(
                f"  {'FAIL' if problem else 'ok  '} {took:6.1f} s  {command.where}: {command.text.split('  #')[0]}",
                flush=True,
            )
            if problem:
                failures += 1
                print(
                    f"       {problem}:\n"
                    + "\n".join(f"       | {line}" for line in (done.stderr + done.stdout).splitlines()[-20:])
                )
        changed = [str(page.relative_to(copy)) for page, text in pages.items() if page.read_text() != text]
        if changed:
            failures += 1
            print(f"  FAIL the commands changed {', '.join(changed)}: a generated block is stale (`make docs`)")
    for why, not_run in skipped.items():
        print(f"not run ({why}): {len(not_run)}")
        for command in not_run:
            print(f"    {command.where}: {command.text.split('  #')[0]}")
    print(f"docs-check: {len(ordered) - failures} of {len(ordered)} passed, {sum(map(len, skipped.values()))} not run, "
          f"in {time.monotonic() - started:.0f} s")  # fmt: skip
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true", help="run the offline commands on a fresh copy of the checkout")
    args = parser.parse_args(argv)
    try:
        if args.run:
            return run_all()
        for command in all_commands():
            verdict = classify(command)
            print(
                f"{'run' if verdict.run else 'not run'}: {command.where}: {command.text}"
                + ("" if verdict.run else f"  ({verdict.why})")
            )
    except UnknownCommand as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
