"""The Agent Engine of spec 004: declarative DAG flows, routed by a scheduler on the kernel's runtime.

``Engine.from_config_dir(path)`` loads a flow directory (:mod:`~aeon_kernel.flow.loader`) and returns a
:class:`~aeon_kernel.flow.engine.FlowEngine`; its runs are kernel runs driven by
:class:`~aeon_kernel.flow.router.FlowScheduler`. See ``docs/flows.md``.
"""
