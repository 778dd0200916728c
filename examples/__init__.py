"""Example applications written with inclib, and the same ones written directly against the
transport (``examples/direct/``); ``python -m examples.run APP`` runs one on Mininet."""
