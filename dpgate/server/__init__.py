"""``dpgate serve``: the gateway as a PostgreSQL-protocol server with SCRAM-authenticated analysts.

- ``scram``: verifiers and the server side of SCRAM-SHA-256;
- ``wire``: the protocol's messages, types and SQLSTATEs;
- ``session``: what one authenticated client may run (an analyst's gateway, or owner commands);
- ``serve``: the asyncio server (startup, authentication, simple and extended query, cancel).
"""
