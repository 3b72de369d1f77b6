"""An emulated Kubeflow Trainer cluster served over HTTP on loopback (stdlib only).

``Emulator().start()`` listens on 127.0.0.1; ``write_kubeconfig(path)`` points the
official client at it; the driver methods (``preempt``, ``oom``, ``exit``, ``lose_node``,
...) provoke each ending through the same objects a cluster would show.
"""

from dispatch_kubeflow_testing.emulator.driver import TOKEN, Emulator

__all__ = ["TOKEN", "Emulator"]
