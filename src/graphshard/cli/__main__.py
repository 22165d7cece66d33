"""``python -m graphshard.cli``: the same as the ``graphshard`` command (used by torchrun: ``-m graphshard.cli``)."""

import sys

from . import main

sys.exit(main())
