"""The former path of :mod:`nemo_genrm.config_reference`, kept so ``python -m nemo_genrm.docs
--write`` (and ``--check``) and its imports keep working.

Renamed because ``nemo_genrm/docs/`` read as the top-level ``docs/`` folder; it generates one page
of it, the configuration reference.
"""

from nemo_genrm.config_reference import COMMAND, DOC_PATH, SECTIONS, main, reference

__all__ = ["COMMAND", "DOC_PATH", "SECTIONS", "main", "reference"]
