"""dispatch-testing: the conformance kit every dispatch backend must pass
(:mod:`dispatch_testing.kit`, where an adapter imports :class:`~dispatch_testing.kit.Harness`
and the rest from), a simulated, fault-injecting scheduler
(:mod:`dispatch_testing.simulated`), and test utilities (:mod:`dispatch_testing.waiting`)."""
