"""``python -m treadle``: the same as the ``treadle`` command."""

import sys

from .cli import main

sys.exit(main())
