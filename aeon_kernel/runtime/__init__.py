"""The runtime: a :class:`~aeon_kernel.runtime.run.Run` drives cycles (TTL, commit, log record, events, resume)
and asks a :class:`~aeon_kernel.runtime.scheduler.Scheduler` what each cycle does.

Nothing here knows what a plan, a pass or a flow is: those are schedulers, and this package imports none of them.
"""
