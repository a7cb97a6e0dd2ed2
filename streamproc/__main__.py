"""``python -m streamproc`` is the ``streamproc`` command."""

import sys

from streamproc.cli.main import main

sys.exit(main())
