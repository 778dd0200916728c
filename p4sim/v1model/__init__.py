"""p4sim.v1model."""
