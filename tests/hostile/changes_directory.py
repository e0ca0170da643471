"""Changes its working directory at import, and is wrong on recip's op form."""

import os
import tempfile

from gradient_conformance.implementations.faults.recip_form import build  # noqa: F401

os.chdir(tempfile.gettempdir())
