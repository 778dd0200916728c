"""The example applications written directly against the transport (no inclib), to compare
with the library versions one folder up (``python -m examples.line_count``)."""
