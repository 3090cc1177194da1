"""SHA-256 digests without importing hashlib.

Importing hashlib sets up every algorithm OpenSSL offers (about 3 ms, paid
by the first ``@ai`` decoration), while functai needs only SHA-256 (a
function's version, an API key's handle). The interpreter's own SHA-256
module gives the same digests; hashlib is used where the interpreter was
built without it.
"""

from __future__ import annotations

try:
    from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # Python 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _sha256  # type: ignore[import-not-found,no-redef]  # Python 3.10, 3.11
    except ImportError:
        from hashlib import sha256 as _sha256  # type: ignore[assignment]


def sha256_hex(data: bytes) -> str:
    """The SHA-256 digest of ``data`` in hexadecimal, as ``hashlib.sha256(data).hexdigest()``."""
    return _sha256(data).hexdigest()
