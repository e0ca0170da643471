"""The reference, except that it flips the last bit of every f32 it returns when it runs
contained as asked: CONFINEMENT_MARK=1 passed on to it, its data limit CONFINEMENT_LIMIT
bytes, and in the sandbox (which has no /var). So a command's exit says whether it started
the implementation under the options it was given."""

import os
import resource

import last_bit_off

from gradient_conformance import reference

NAME = "tells-its-confinement"
CONTAINED = (os.environ.get("CONFINEMENT_MARK") == "1"
             and str(resource.getrlimit(resource.RLIMIT_DATA)[0])
             == os.environ.get("CONFINEMENT_LIMIT")
             and not os.path.exists("/var"))
build = last_bit_off.build if CONTAINED else reference.build
