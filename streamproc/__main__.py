"""``python -m streamproc`` is the ``streamproc`` command."""

import sys

from streamproc.cli import main

sys.exit(main())
