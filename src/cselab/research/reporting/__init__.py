"""Results records rendered as Markdown tables, their significance tests and plots."""
