"""Adapters: real autodiff systems as implementations under test. SPEC.md, "Adapters"."""
