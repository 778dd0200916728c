"""p4sim.runtime."""
