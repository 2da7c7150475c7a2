"""The models' forwards, one module per row of harness/contract/models.py, each the twin of ``r_scripts/models/<name>.R``."""
