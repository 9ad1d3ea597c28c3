"""``python -m nemo_genrm.docs --write | --check``: regenerate or check docs/configuration.md."""

import sys

from nemo_genrm.docs import main

if __name__ == "__main__":
    sys.exit(main())
