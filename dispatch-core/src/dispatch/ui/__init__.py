"""``dispatch ui``: a read-only web view of the record, and the metrics a cluster's
monitoring scrapes (``/metrics``, ``dispatch metrics``).

Everything here reads the record through :class:`dispatch.Client` and the store's read
methods; nothing here appends. The server is the standard library's ``http.server``: three
pages, a stylesheet and a script need no framework, and the one place where untrusted text
becomes HTML is :func:`dispatch.ui.html.html`.
"""
