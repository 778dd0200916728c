"""What every system's host side shares: UDP endpoints (``udp``), the sliding window over
PSNs (``sliding_window``), fixed-point quantisation (``quantize``) and progress reports to
the controller daemon (``progress_report``). Knows no system."""
