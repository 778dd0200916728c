"""``python -m controller.sched_sim``: the trace-driven scheduling simulator, which lives in
``controller/sched/sched_sim.py``; this name is kept for commands written before the move."""

import sys

from controller.sched.sched_sim import main

if __name__ == "__main__":
    sys.exit(main())
