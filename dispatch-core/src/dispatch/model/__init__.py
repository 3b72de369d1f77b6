"""The models the pure core and the shell exchange: pure themselves.

Vocabularies (``enums``), errors, the record's events, what a user asked to run
(``spec``), what a backend declares and what it discovers. Nothing here reads a clock,
a file or a network; the boundary test checks this package as it checks ``dispatch.core``.
"""
