"""The one exception type for bad input, so the CLI can turn it into a message and exit code 2."""


class AnalysisError(Exception):
    """Input the tool cannot use (missing file, malformed log, unknown name); the message says why."""
