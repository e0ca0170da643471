"""`python -m gradient_conformance ...`: the same as the `gradient-conformance` command."""

import sys

from gradient_conformance.conformance.commands import main

sys.exit(main())
