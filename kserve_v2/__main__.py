"""``python -m kserve_v2``: the ``kserve-v2`` command."""

import sys

from kserve_v2.cli import main

sys.exit(main())
