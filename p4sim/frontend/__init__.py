"""p4sim.frontend."""
