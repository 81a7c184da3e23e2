"""The catalog: the public facts the owner declared, kept in the database file.

``tables`` loads protected tables, units, domains and bounds; ``owner`` is the owner's API
(``Owner``, assembled from ``declare``, ``rosters``, ``policy`` and ``reports``, with ``checks``
they share); ``facts`` what planning may ask DuckDB (schemas, bindings, never rows); ``releases``
the registry of synthetic releases and their lineage; ``logins`` the server's SCRAM verifiers.
The catalog imports no later stage: what the owner needs from one comes through ``hooks``.
"""
