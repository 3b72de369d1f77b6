"""Kit harnesses for backends that ship without one of their own (the core's ``local``)."""
