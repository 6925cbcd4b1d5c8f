"""``python -m regroup``: the same as the ``regroup`` console script."""

import sys

from regroup.cli.main import main

sys.exit(main())
