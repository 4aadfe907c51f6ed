"""cselab's lab: the studies that measure cselab, their records, tables and lab books.

Nothing here is part of the package users install. The lab imports cselab like any user would; cselab never
imports the lab. Run its scripts from the repository's root as modules (``python -m lab.domain_study.run_domains``)
and render every table again with ``python -m lab.render`` (see ``lab/README.md``).
"""
