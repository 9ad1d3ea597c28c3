"""``python -m nemo_genrm.docs --write | --check``: the former command of
``python -m nemo_genrm.config_reference``, which it runs."""

import sys

from nemo_genrm.config_reference import main

if __name__ == "__main__":
    sys.exit(main())
