"""p4sim.compiler."""
