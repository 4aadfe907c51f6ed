"""Rendering results records (benchmarks/results/*.jsonl) into Markdown tables."""
