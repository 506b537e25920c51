"""``python -m amari_gpu``: the command line."""

import sys

from .tools.cli import main

sys.exit(main())
