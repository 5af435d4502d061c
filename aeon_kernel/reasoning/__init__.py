"""Adaptive multi-pass reasoning (spec 003): its data model, its contracts, refinement deltas, and the multi-pass
scheduler that wraps the linear one."""
