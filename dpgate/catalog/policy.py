"""Policy files: one TOML file declares tables, graphs, release caps, answer memory, analysts and logins.

The ``apply_policy`` method of ``dpgate.Owner``: each entry is checked for unknown keys, then applied
through the same methods as from Python (``protect``, ``add_analyst``, ``set_login``, ...).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Any

from dpgate import errors
from dpgate.catalog import caps as release_caps
from dpgate.catalog import sample_order as sample_order_mod
from dpgate.catalog import shares as budget_shares
from dpgate.catalog.checks import check_flag, check_keys
from dpgate.catalog.declare import DEFAULT_SUBJECT_DELTA, DEFAULT_SUBJECT_EPSILON


class PolicyFiles:
    """Part of ``Owner``: ``apply_policy``."""

    # -- policy files --------------------------------------------------------------------
    def apply_policy(self, policy: Mapping[str, Any] | str | os.PathLike) -> list[str]:
        """Apply a policy (a parsed mapping, or the path of a TOML file). Returns what was done."""
        if not isinstance(policy, Mapping):
            with open(policy, "rb") as f:
                try:
                    policy = tomllib.load(f)
                except tomllib.TOMLDecodeError as e:
                    raise errors.PolicyError(f"Policy file is not valid TOML: {e}", code="DP330") from e
        check_keys("policy", policy, {"tables", "graphs", "analysts", "owners", "backends", "release_caps", "answers",
                                      "budget_share"})  # fmt: skip
        done = []
        backends = policy.get("backends", {})
        check_keys("[backends]", backends, {"spark"})
        if "spark" in backends:  # before the tables: their Spark sources are read with it
            spec = backends["spark"]
            check_keys("[backends.spark]", spec, {"master", "conf"})
            self.set_spark(spec.get("master"), spec.get("conf"))
            done.append(f"Spark backend at {spec.get('master')}")
        for tname, spec in policy.get("tables", {}).items():
            check_keys(
                f"[tables.{tname}]",
                spec,
                {"unit", "max_rows", "max_groups", "budget", "subject_delta", "columns", "options", "subjects",
                 "public_roster", "experimental", "spark", "sample_order"},
            )
            if "unit" not in spec:
                raise errors.PolicyError(f"[tables.{tname}] needs unit = \"<column>\"", code="DP330")
            budget = spec.get("budget", {"default": DEFAULT_SUBJECT_EPSILON})
            if not isinstance(budget, Mapping):
                budget = {"default": budget}
            check_keys(f"[tables.{tname}].budget", budget, {"default", "column", "table", "unit", "epsilon_column"})
            domains, bounds, trees = {}, {}, {}
            for cname, cspec in spec.get("columns", {}).items():
                check_keys(f"[tables.{tname}.columns.{cname}]", cspec, {"domain", "bounds", "nullable", "hierarchy"})
                if "hierarchy" in cspec:
                    trees[cname] = cspec["hierarchy"]
                if "domain" in cspec:
                    domains[cname] = list(cspec["domain"]) + ([None] if cspec.get("nullable") else [])
                if "bounds" in cspec:
                    lo, hi = cspec["bounds"]
                    bounds[cname] = (lo, hi)
            self.protect(
                tname,
                unit=spec["unit"],
                max_rows=spec.get("max_rows", 1),
                max_groups=spec.get("max_groups"),
                epsilon=budget.get("default"),
                budget_column=budget.get("column"),
                budget_table=budget.get("table"),
                budget_table_unit=budget.get("unit"),
                budget_table_column=budget.get("epsilon_column", "epsilon"),
                subject_delta=spec.get("subject_delta", DEFAULT_SUBJECT_DELTA),
                domains=domains,
                bounds=bounds,
                options=spec.get("options"),
                subjects=spec.get("subjects"),
                public_roster=check_flag(f"[tables.{tname}] public_roster", spec.get("public_roster", False)),
                hierarchies=trees,
                # the policy is authoritative: a table whose entry no longer says experimental = true is closed
                experimental=check_flag(f"[tables.{tname}] experimental", spec.get("experimental", False)),
                spark=spec.get("spark"),
                # the policy is authoritative here too: an entry without the key gets the default
                sample_order=spec.get("sample_order", sample_order_mod.DEFAULT),
            )
            done.append(f"protected {tname} (unit {spec['unit']})")
        for gname, spec in policy.get("graphs", {}).items():
            check_keys(f"[graphs.{gname}]", spec, {"src", "dst", "nodes", "node_column", "epsilon", "allow_kclique",
                                                   "spark"})
            for key in ("src", "dst", "nodes"):
                if key not in spec:
                    raise errors.PolicyError(f"[graphs.{gname}] needs {key} = ...", code="DP330")
            self.protect_graph(
                gname,
                src=spec["src"],
                dst=spec["dst"],
                nodes=spec["nodes"],
                node_column=spec.get("node_column"),
                epsilon=spec.get("epsilon"),
                allow_kclique=check_flag(f"[graphs.{gname}] allow_kclique", spec.get("allow_kclique", False)),
                spark=spec.get("spark"),
            )
            done.append(f"protected graph {gname} ({spec['src']} - {spec['dst']})")
        if "answers" in policy:  # how answers are remembered (``catalog.remembered``)
            spec = policy["answers"]
            check_keys("[answers]", spec, {"mode", "max_entries", "max_bytes", "max_age"})
            self.set_answer_memory(spec.get("mode"), **{k: v for k, v in spec.items() if k != "mode"})
            done.append("answers remembered: " + ", ".join(f"{k} = {v}" for k, v in spec.items()))
        if "release_caps" in policy:  # the database's defaults
            check_keys("[release_caps]", policy["release_caps"], release_caps.DEFAULTS)
            self.set_release_caps(None, **policy["release_caps"])
            done.append("release caps " + ", ".join(f"{k} = {v}" for k, v in policy["release_caps"].items()))
        if "budget_share" in policy:  # the database's default (authoritative only when stated)
            self.set_budget_share(policy["budget_share"])
            done.append(f"budget share {policy['budget_share']}")
        for aname, spec in policy.get("analysts", {}).items():
            check_keys(
                f"[analysts.{aname}]", spec,
                {"epsilon", "delta", "epsilon_per_query", "delta_per_query", "allow_test_seed", "scram", "share",
                 *release_caps.DEFAULTS},
            )  # fmt: skip
            if "epsilon" not in spec:
                raise errors.PolicyError(f"[analysts.{aname}] needs epsilon = <quota>", code="DP330")
            share = budget_shares.own_share(spec.get("share"))  # refused (DP347) before the analyst is written
            self.add_analyst(
                aname,
                epsilon=spec["epsilon"],
                delta=spec.get("delta", 1e-5),
                epsilon_per_query=spec.get("epsilon_per_query"),
                delta_per_query=spec.get("delta_per_query"),
            )
            if "allow_test_seed" in spec:
                self.allow_test_seed(aname, check_flag(f"[analysts.{aname}] allow_test_seed", spec["allow_test_seed"]))
            if "scram" in spec:  # a login for dpgate serve: a verifier, never a password, in a file
                self.set_login(aname, verifier=spec["scram"])
            own = {k: spec[k] for k in release_caps.DEFAULTS if k in spec}
            if own:
                self.set_release_caps(aname, **own)
            # the policy is authoritative: an entry without share follows the database's default
            self.set_budget_share(share, aname)
            done.append(f"analyst {aname} (epsilon quota {spec['epsilon']})")
        for oname, spec in policy.get("owners", {}).items():  # owner logins of dpgate serve
            check_keys(f"[owners.{oname}]", spec, {"scram"})
            if "scram" not in spec:
                raise errors.PolicyError(f"[owners.{oname}] needs scram = <SCRAM-SHA-256 verifier>", code="DP330")
            self.set_login(oname, verifier=spec["scram"], owner=True)
            done.append(f"owner login {oname}")
        return done
