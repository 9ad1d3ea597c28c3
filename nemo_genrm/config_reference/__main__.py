"""``python -m nemo_genrm.config_reference --write | --check``: regenerate or check docs/configuration.md."""

import sys

from nemo_genrm.config_reference import main

if __name__ == "__main__":
    sys.exit(main())
