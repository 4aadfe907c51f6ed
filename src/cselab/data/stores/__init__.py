"""What cselab keeps on disk: JSON-lines records and logs, a corpus's on-disk index, vectors of a text."""
