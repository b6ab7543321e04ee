"""``python -m gradcheck``: the command line (:mod:`gradcheck.cli`), as the model libraries
start it (``$GRADCHECK_PYTHON -m gradcheck model --peer-stdio``)."""

import sys

from gradcheck.cli import main

if __name__ == "__main__":
    sys.exit(main())
