"""Personalised federated learning (docs/personalised.md): the per-client state store
(`store`), what "head" means per model family (`heads`), the methods (`methods`, registered in
fedbench.algorithms' registry; their base class `PersonalAlgorithm` is part of the algorithm
contract, fedbench.algorithms.personal), the protocol's setup (`setup`: unseen clients) and
the personalised evaluation protocol (`evaluate`, `summary`).

Kept import-free: the engine imports its submodules directly."""
