"""Hypothesis strategies that draw whole test cases: valid, differentiable, exact,
order-sensitive and invalid programs, with buffers. SPEC.md is what they generate.

Every strategy draws a `Case`: IR text, initial buffers, the rejection expected (if any), and a
description. Text is the interchange, so a case runs against any implementation.
"""

from gradient_conformance.generators.buffers import buffers_for, kink_distance
from gradient_conformance.generators.case import Case
from gradient_conformance.generators.order import order_sensitive_gradients
from gradient_conformance.generators.programs import (
    differentiable_programs,
    exact_programs,
    programs,
)
from gradient_conformance.generators.rejections import invalid_gradients, near_misses

__all__ = ["Case", "buffers_for", "differentiable_programs", "exact_programs",
           "invalid_gradients", "kink_distance", "near_misses", "order_sensitive_gradients",
           "programs"]
