"""`python -m conformance ...` in a checkout: the `gradient-conformance` command."""

import os
import sys

# `python -m` puts the current folder first on the import path: the implementation's folder,
# often, whose `mpmath.py` or `numpy/` would then be imported into the suite's own process
# (docs/isolation.md, "The suite's own process"). Only this package is looked up there.
if sys.path and os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.getcwd()):
    del sys.path[0]

from gradient_conformance.conformance.commands import main

sys.exit(main())
