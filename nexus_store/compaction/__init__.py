"""Compaction above the store: plan, staged summaries, summarizers, policy and pruning.

The modules here are pure or talk only to a summarizer; the store is handed in
and written through its public methods.
"""
