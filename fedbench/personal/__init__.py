"""Personalised federated learning (docs/personalised.md): the per-client state store
(`store`), what "head" means per model family (`heads`), the base class of personalised
methods (`base`), the methods (`methods`, registered in fedbench.algorithms' registry) and the
personalised evaluation protocol (`evaluate`, `summary`).

Kept import-free: the engine imports its submodules directly."""
