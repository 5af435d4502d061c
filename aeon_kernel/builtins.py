"""The kernel's own components, registered like any plugin's: the ``model`` planner, the ``linear`` and
``multipass`` schedulers, the flow node implementations of :mod:`aeon_kernel.flow.nodes` and the ``recency`` and
``prefix`` retrieval policies.

They are registered by the kernel itself (as ``aeon.kernel``, beside the step executor and the tool invoker), not
through an entry point, so that ``AeonConfig()`` works with plugin autoloading off (decision 0008).
"""

from __future__ import annotations

from aeon_kernel.flow.context import by_prefix, recency
from aeon_kernel.flow.nodes import KERNEL_NODES
from aeon_kernel.markers import hookimpl
from aeon_kernel.plan.linear import LinearPlanScheduler
from aeon_kernel.plan.planner import ModelPlanner
from aeon_kernel.reasoning.passes import MultiPassScheduler
from aeon_kernel.registry import Register


class KernelComponents:
    @hookimpl
    def aeon_register_planners(self, register: Register) -> None:
        register("model", ModelPlanner)

    @hookimpl
    def aeon_register_schedulers(self, register: Register) -> None:
        register("linear", LinearPlanScheduler)
        register("multipass", MultiPassScheduler)

    @hookimpl
    def aeon_register_nodes(self, register: Register) -> None:
        for name, factory in KERNEL_NODES.items():
            register(name, factory)

    @hookimpl
    def aeon_register_retrieval_policies(self, register: Register) -> None:
        register("recency", lambda: recency)
        register("prefix", lambda: by_prefix)
