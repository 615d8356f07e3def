"""``python -m server``: the same as the ``eightoff`` command."""

import sys

from server.cli import main

sys.exit(main())
