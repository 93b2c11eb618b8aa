"""``python -m optdiv``: the ``optdiv`` command (what a Dask driver or a test runs as a subprocess)."""

import sys

from optdiv.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports this module as its __mp_main__
    sys.exit(main())
