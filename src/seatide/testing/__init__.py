"""Tools that prove the control plane: the deterministic simulation (``simulate``)."""
