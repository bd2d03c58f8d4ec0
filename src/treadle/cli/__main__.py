"""``python -m treadle.cli``: the same as the ``treadle`` command."""

import sys

from . import main

sys.exit(main())
