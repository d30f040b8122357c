"""A stand-in for NVIDIA's cupti-python package (``from cupti import cupti``); see ``cupti.py``."""
