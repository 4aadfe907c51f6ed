"""The evaluation sets: STS (STS-B and SentEval's layout), the domain suite, and how much of a test set a
training text holds."""
