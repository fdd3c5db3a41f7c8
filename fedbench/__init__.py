"""fedbench: reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom)."""

__version__ = "0.1.0"
