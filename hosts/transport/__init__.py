"""What every system's host side shares: UDP endpoints (``udp``), the sliding window over
PSNs (``sliding_window``), fixed-point quantisation (``quantize``) and progress reports to
the controller daemon (``progress_report``), and the aggregation client's packet loop in C
(``native_window``, with the build that the systems' other C loops use). Knows no system."""
