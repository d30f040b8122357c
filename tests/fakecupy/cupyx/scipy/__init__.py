"""``cupyx.scipy`` for the NumPy-backed CuPy stand-in (see ``../../cupy/__init__.py``)."""
