"""``python -m gradtrace.cli``: the same as the ``gradtrace`` console script."""
import sys

from gradtrace.cli.main import main

sys.exit(main())
