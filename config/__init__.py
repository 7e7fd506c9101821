"""The stack file's schema, split by layer, and the loader that turns bad values into one
line per key. Imports facts only (and pydantic); never pulumi, planners or components."""
