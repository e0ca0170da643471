"""Builds and rejects like the fast implementation, and runs to NaN in every f32 slot."""

import numpy as np

from gradient_conformance.implementations import fast


def build(source):
    run = fast.build(source)
    return lambda buffers: {k: np.full_like(v, np.nan) if v.dtype == np.float32 else v
                            for k, v in run(buffers).items()}
