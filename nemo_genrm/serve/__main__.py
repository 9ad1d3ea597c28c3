"""``python -m nemo_genrm.serve``: start the judge service from a YAML config and serve until Ctrl-C."""

from nemo_genrm.serve.service import main

if __name__ == "__main__":
    main()
