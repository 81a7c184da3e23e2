"""SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL uses it: verifiers and the server's side.

The server stores only a verifier, ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``
(PostgreSQL's format, so ``psql``'s ``\\password`` can send one), never the password: StoredKey
lets the server check a client's proof, ServerKey lets it prove that it knew the verifier, and
neither lets anyone log in without the password. Channel binding is not offered (the server
advertises ``SCRAM-SHA-256`` only), as PostgreSQL does without TLS.

The proof is compared in constant time (``hmac.compare_digest``). For a name with no login the
exchange runs against a fake verifier derived from a server secret, so the messages do not say
whether the name exists.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import unicodedata

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)
#: The most PBKDF2 iterations a stored verifier may ask for. ``dpgate web`` checks a password by
#: running them on the server (a SCRAM client runs them itself), so a verifier of 2^31 iterations,
#: which PostgreSQL would store, would hold a sign-in thread for half an hour per attempt, and
#: anyone who knows the name could keep every thread busy.
MAX_ITERATIONS = 100_000


class ScramError(Exception):
    """A malformed or failed exchange (the message is safe to show the client)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as e:
        raise ScramError("malformed SCRAM message: bad base64") from e


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def _normalize(password: str) -> bytes:
    """SASLprep, as far as PostgreSQL applies it: NFKC; PostgreSQL uses the raw bytes when the
    password is not valid for SASLprep, and so does a client like libpq, so both agree."""
    return unicodedata.normalize("NFKC", password).encode("utf-8")


def make_verifier(password: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """The stored verifier for ``password`` (a fresh 16-byte salt unless given)."""
    if not password:
        raise ValueError("an empty password cannot log in")
    salt = secrets.token_bytes(16) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", _normalize(password), salt, iterations)
    stored = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    server = _hmac(salted, b"Server Key")
    return f"{MECHANISM}${iterations}:{_b64(salt)}${_b64(stored)}:{_b64(server)}"


def parse_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    """(iterations, salt, StoredKey, ServerKey); ValueError when it is not a SCRAM-SHA-256 verifier."""
    try:
        mech, params, keys = verifier.split("$")
        iterations, salt = params.split(":")
        stored, server = keys.split(":")
        out = int(iterations), base64.b64decode(salt, validate=True), base64.b64decode(stored, validate=True), \
            base64.b64decode(server, validate=True)  # fmt: skip
    except (ValueError, TypeError) as e:
        raise ValueError("not a SCRAM-SHA-256 verifier") from e
    if mech != MECHANISM or out[0] < 1 or len(out[2]) != 32 or len(out[3]) != 32:
        raise ValueError("not a SCRAM-SHA-256 verifier")
    return out


def check_password(verifier: str, password: str, *, real: bool = True) -> bool:
    """Whether ``password`` is the one ``verifier`` was made from (a login that sends the password
    itself, as ``dpgate web``'s form does over its loopback or TLS connection). The same PBKDF2 work
    as a SCRAM exchange, and StoredKey compared in constant time; ``real`` False (a fake verifier)
    is always False, after the same work."""
    iterations, salt, stored_key, _ = parse_verifier(verifier)
    salted = hashlib.pbkdf2_hmac("sha256", _normalize(password), salt, iterations)
    candidate = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
    return hmac.compare_digest(candidate, stored_key) and real


def fake_verifier(name: str, secret: bytes) -> str:
    """A verifier nobody can log in with, stable per name (so probes see a consistent salt)."""
    salt = _hmac(secret, b"salt:" + name.encode("utf-8"))[:16]
    junk = _hmac(secret, b"keys:" + name.encode("utf-8"))
    return f"{MECHANISM}${ITERATIONS}:{_b64(salt)}${_b64(junk)}:{_b64(junk)}"


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError("malformed SCRAM message")
        out.setdefault(part[0], part[2:])
    return out


class ServerExchange:
    """One login's exchange: ``first(client_first) -> server_first``, ``final(client_final)``.

    ``final`` returns the server-final message when the proof is right and raises ScramError
    otherwise; ``real`` False (a fake verifier) always fails, after the same work.
    """

    def __init__(self, verifier: str, *, real: bool = True):
        self.iterations, self.salt, self.stored_key, self.server_key = parse_verifier(verifier)
        self.real = real
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._nonce = ""

    def first(self, client_first: str, *, server_nonce: str | None = None) -> str:
        # gs2-header: "n,," (no channel binding) or "y,," (client could, server does not offer it)
        if client_first.startswith(("n,", "y,")):
            cb, rest = client_first[0], client_first[2:]
        elif client_first.startswith("p="):
            raise ScramError("channel binding is not supported by this server")
        else:
            raise ScramError("malformed SCRAM client-first message")
        authzid, sep, bare = rest.partition(",")
        if not sep or authzid:
            raise ScramError("SCRAM authorization identities are not supported")
        attrs = _attributes(bare)
        if "r" not in attrs or not attrs["r"] or "m" in attrs:
            raise ScramError("malformed SCRAM client-first message")
        self._gs2 = f"{cb},,"
        self._client_first_bare = bare
        self._nonce = attrs["r"] + (server_nonce or _b64(secrets.token_bytes(18)))
        self._server_first = f"r={self._nonce},s={_b64(self.salt)},i={self.iterations}"
        return self._server_first

    def final(self, client_final: str) -> str:
        without_proof, sep, proof_part = client_final.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM client-final message")
        attrs = _attributes(without_proof)
        if attrs.get("c") != _b64(self._gs2.encode("ascii")):
            raise ScramError("SCRAM channel binding does not match")
        if not hmac.compare_digest(attrs.get("r", "").encode(), self._nonce.encode()):
            raise ScramError("SCRAM nonce does not match")
        proof = _unb64(proof_part)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        signature = _hmac(self.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("password authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        ok = hmac.compare_digest(hashlib.sha256(client_key).digest(), self.stored_key)
        if not (ok and self.real):
            raise ScramError("password authentication failed")
        return "v=" + _b64(_hmac(self.server_key, auth_message))


def client_proof(password: str, client_first_bare: str, server_first: str, client_final_without_proof: str) -> str:
    """The client's proof (tests and the RFC's example use it)."""
    attrs = _attributes(server_first)
    salted = hashlib.pbkdf2_hmac("sha256", _normalize(password), _unb64(attrs["s"]), int(attrs["i"]))
    client_key = _hmac(salted, b"Client Key")
    auth_message = f"{client_first_bare},{server_first},{client_final_without_proof}".encode("utf-8")
    signature = _hmac(hashlib.sha256(client_key).digest(), auth_message)
    return _b64(bytes(a ^ b for a, b in zip(client_key, signature)))
