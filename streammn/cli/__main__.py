"""``python -m streammn.cli``: the ``streammn`` command."""

import sys

from streammn.cli.parser import main

sys.exit(main())
