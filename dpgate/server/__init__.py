"""``dpgate serve``: the gateway as a PostgreSQL-protocol server with SCRAM-authenticated analysts.

- ``wire``: the protocol's messages, types and SQLSTATEs;
- ``session``: what one authenticated client may run (an analyst's gateway, or the owner commands of
  ``dpgate.interfaces.owner_commands``; SCRAM itself is ``dpgate.scram``);
- ``guard``: logins under hostile load (turns per name, failure delays, address groups, pre-login slots);
- ``peer``: the local user owning a loopback client's socket;
- ``running``: a statement in flight (time limits, cancel, streamed and capped rows, per-login slots);
- ``queries``: simple and extended query, portals;
- ``serve``: the asyncio server (startup, authentication, connections).
"""
