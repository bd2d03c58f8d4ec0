#!/usr/bin/env python3
"""Run the loop's deterministic simulation: ``scripts/simulate.py --seeds 20000 --backend trio``.

The same as ``python -m treadle.simulation`` (see docs/testing.md, "The
simulation"); run it under ``nice`` for long campaigns.
"""

import sys

from treadle.simulation.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
