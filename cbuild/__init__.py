"""C sources compiled with the system compiler on first use and cached (``shared_library``).

Shared by p4sim's native back end (generated C) and the hosts' native data path
(hosts/transport/native_window.c); imports nothing of ours, so both layers may use it.
"""
