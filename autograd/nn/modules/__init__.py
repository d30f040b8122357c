"""Layers as modules."""
from .activation import *  # noqa: F401,F403
from .activation import __all__ as _activation
from .attention import *  # noqa: F401,F403
from .attention import __all__ as _attention
from .extra import *  # noqa: F401,F403
from .extra import __all__ as _extra
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layers
from .module import *  # noqa: F401,F403
from .module import __all__ as _module
from .rnn import *  # noqa: F401,F403
from .rnn import __all__ as _rnn
from .transformer import *  # noqa: F401,F403
from .transformer import __all__ as _transformer

__all__ = (list(_module) + list(_layers) + list(_attention) + list(_activation) + list(_extra)
           + list(_rnn) + list(_transformer))

# PyTorch's submodule names (``torch.nn.modules.conv.Conv2d``...), each mapping its classes
# to where they live here.
from . import (batchnorm, container, conv, distance, dropout, flatten, fold,  # noqa: F401,E402
               instancenorm, linear, loss, normalization, padding, pixelshuffle, pooling,
               sparse, upsampling)
