"""Serene's host side: several epochs' all-reduces in flight (``ssp_client``), the
worker (``worker``) and training under its synchronisation modes (``train``)."""
