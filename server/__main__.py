"""``python -m server``: the same as the ``eightoff`` command."""

import sys

from server.ops.cli import main

sys.exit(main())
