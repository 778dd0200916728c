"""``python -m controller.sync_policy``: Serene's synchronisation policies, which lives in
``controller/systems/sync_policy.py``; this name is kept for commands written before the move."""

import sys

from controller.systems.sync_policy import main

if __name__ == "__main__":
    sys.exit(main())
