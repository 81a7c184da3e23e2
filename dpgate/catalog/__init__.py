"""The catalog: the public facts the owner declared, kept in the database file.

``tables`` loads protected tables, units, domains and bounds; ``owner`` is the owner's API and
policy files; ``facts`` what planning may ask DuckDB (schemas, bindings, never rows);
``releases`` the registry of synthetic releases and their lineage.
"""
