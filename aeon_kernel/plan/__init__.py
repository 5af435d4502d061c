"""Linear plans: the planner that writes a plan, the scheduler that runs it step by step, and the step executor."""
