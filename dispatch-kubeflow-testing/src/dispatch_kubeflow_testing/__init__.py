"""Test infrastructure for dispatch-kubeflow, kept out of the product wheel.

A production user installs ``dispatch-kubeflow`` and gets the adapter only; the emulated
Trainer cluster (:mod:`dispatch_kubeflow_testing.emulator`), the conformance-kit harness
(:mod:`dispatch_kubeflow_testing.harness`, entry point ``dispatch.harnesses: kubeflow``)
and the real control plane for the live tier (:mod:`dispatch_kubeflow_testing.live`) live
here, because shipping a scenario driver that preempts, OOM-kills and loses nodes to every
cluster user is a hazard and dead weight.
"""
