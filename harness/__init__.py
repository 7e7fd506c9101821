"""The offline harness: the program run under recording mocks (runner, mocks), every object
validated against the real schemas and CEL rules (schemas, cel), stack files read as the Pulumi
CLI reads them (stackfile), and what an update would do to live objects (updates). The tests and
the user tools in tools/ build on it."""
