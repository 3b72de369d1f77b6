"""The kit's own tests run inner pytest sessions in this process (pytester), and each inner
run drops the modules it imported. ``dispatch`` caches the names it imports lazily, so a
second inner run would mix a cached ``dispatch.Rule`` with a re-imported ``dispatch.core.policy``.
Resolving every lazy name here, once, keeps one copy of each module for all runs."""

import dispatch
import dispatch.job_records
import dispatch.store.sqlite
import dispatch.supervisor

for _name in dispatch.__all__:
    getattr(dispatch, _name)
