"""The research wing: recorded runs, seeds, ablations, ensembles, a paper's row (``cselab reproduce``), the
papers' analyses and reports, and the papers' published figures. The product (``cselab adapt``) never imports it."""
