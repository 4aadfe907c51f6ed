"""The papers' own data over HTTP (wiki1m, SentEval, SICK-R), which no package registry carries."""
