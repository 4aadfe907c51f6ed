"""``python -m cselab.cli ...`` (and ``torchrun ... -m cselab.cli train ...``): the ``cselab`` command."""

from cselab.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
