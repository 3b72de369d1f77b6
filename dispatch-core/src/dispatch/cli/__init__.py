"""The ``dispatch`` command line. Commands import the core lazily: ``--help`` stays fast."""
