"""The domain study: ``cselab adapt`` against sentence-transformers' recipes on the domain suite, with the
label-free selection criteria observed along each run."""
