"""Layers as modules."""
from .attention import *  # noqa: F401,F403
from .attention import __all__ as _attention
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layers
from .module import *  # noqa: F401,F403
from .module import __all__ as _module

__all__ = list(_module) + list(_layers) + list(_attention)
