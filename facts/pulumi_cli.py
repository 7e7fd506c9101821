"""How the Pulumi CLI hands a stack's config to the program: facts the program reads its values by.

Sources: pulumi/pulumi sdk/go/common/resource/config (v3.259.0): `crypt.go` (BlindingCrypter),
`object.go` (`unmarshalObject`: a YAML timestamp becomes `time.Time.String()`), and gopkg.in/yaml.v3
v3.0.1 `resolve.go` (YAML 1.2 booleans only).
"""

from __future__ import annotations

import re

# What stands in for a secret the reader cannot decrypt: the CLI's blinding decrypter writes it, and
# the offline render does the same. Its contents cannot be checked.
SECRET_STAND_IN = "[secret]"

# An unquoted timestamp in a stack file reaches the program as Go writes a time:
# `2026-01-04 03:00:00 +0000 UTC`, `2026-01-04 03:00:00.5 +0200 +0200`.
_GO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) ([+-])(\d{2})(\d{2}) \S+$")

# Words YAML 1.1 read as booleans and YAML 1.2 (the CLI's yaml.v3) reads as strings.
YAML_11_BOOLEANS = frozenset(
    word for base in ("y", "yes", "n", "no", "on", "off") for word in (base, base.capitalize(), base.upper())
)


def rfc3339_of_go_time(text: str) -> str | None:
    """The RFC 3339 timestamp a stack file held when the program receives `text` in Go's time
    format (what an unquoted timestamp becomes); None for any other text."""
    match = _GO_TIME.match(text)
    if match is None:
        return None
    date, time, sign, hours, minutes = match.groups()
    zone = "Z" if hours == minutes == "00" else f"{sign}{hours}:{minutes}"
    return f"{date}T{time}{zone}"


# Pulumi's config holds a whole number inside an object or a list as an int64; one beyond that it holds
# as a float64 (object.go), which reaches the program rounded: 99999999999999999999 as 1e20.
INT64_LIMIT = 2**63


def rounded_by_config(value: object) -> bool:
    """Whether `value` is a whole number the CLI can only have rounded: beyond int64."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return (isinstance(value, int) or value.is_integer()) and not -INT64_LIMIT <= value < INT64_LIMIT


# The exit code by which a Python program tells the language host that it has shown the user an
# error already: the host then ends the run without adding "an unhandled error occurred: program
# exited with non-zero exit code" (pulumi/pulumi sdk/python/cmd/pulumi-language-python-exec,
# PYTHON_PROCESS_EXITED_AFTER_SHOWING_USER_ACTIONABLE_MESSAGE_CODE; pulumi-language-python main.go
# answers it with `Bail: true`). A RunError instead exits 1, which the host reports a second time.
SHOWN_ERROR_EXIT_CODE = 32
