"""Adapters: real autodiff systems as implementations under test. docs/adapters.md, "Adapters"."""
