"""`python -m conformance ...` in a checkout: the `gradient-conformance` command."""

import sys

from gradient_conformance.conformance.commands import main

sys.exit(main())
