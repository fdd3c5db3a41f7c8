"""Sample-level differential privacy: per-sample clipping and noise (mechanism), accounting
with Opacus (accounting) and the run's privacy plan (plan). The dp_ algorithm variants live with
the other algorithms (fedbench.algorithms.dp). Submodules are imported where used so that
importing the package stays cheap."""
