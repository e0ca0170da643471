"""Off by one ulp in every f32 output, and it patches the oracle, numpy and Hypothesis so
that, in its own process, the reference would agree and no case would be generated."""

import numpy as np
from hypothesis import Phase, settings

from gradient_conformance import reference
from gradient_conformance.conformance import outcome
from gradient_conformance.implementations import fast
from gradient_conformance.reference import exact, interp

exact.i32_add = lambda a, b: 0
exact.same_f32 = lambda a, b: True
interp.ExactF32.add = lambda self, a, b: a
np.array_equal = lambda *args, **kwargs: True
reference.build = lambda source: (lambda buffers: buffers)
outcome.compare = lambda *args, **kwargs: None
settings.register_profile("nothing", phases=[Phase.explicit])
settings.load_profile("nothing")


def build(source):
    run = fast.build(source)

    def off(buffers):
        out = run(buffers)
        return {k: (v.view(np.uint32) ^ np.uint32(1)).view(np.float32)
                if v.dtype == np.float32 else v for k, v in out.items()}
    return off
