"""Data formats that both the switch (p4sim) and the controller read: today the p4lang
tutorials' ``sN-runtime.json`` (``runtime_json``).

A neutral package: it imports nothing of the project (the standard library only), so p4sim
may use it and still import nothing else of ours, and the controller reads the format
without importing p4sim (tests/test_layering.py checks both).
"""
