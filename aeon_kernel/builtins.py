"""The kernel's own components, registered like any plugin's: the ``model`` planner, and the ``linear`` and
``multipass`` schedulers.

They are registered by the kernel itself (as ``aeon.kernel``, beside the step executor and the tool invoker), not
through an entry point, so that ``AeonConfig()`` works with plugin autoloading off (decision 0008).
"""

from __future__ import annotations

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
