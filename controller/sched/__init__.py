"""Scheduling of switch memory among jobs: the scheduler and its policies, the epoch
switch-over, scheduled jobs in the daemon (``scheduled_jobs``) and the trace-driven
simulator over the same scheduler (``sched_sim``)."""
