"""Sample-level differential privacy: per-sample clipping and noise (mechanism), accounting
with Opacus (accounting), the run's privacy plan (plan) and the dp_ algorithm variants
(algorithms). Submodules are imported where used so that importing the package stays cheap."""
