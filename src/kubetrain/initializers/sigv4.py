"""Presigned GET URLs for many objects of one bucket, byte for byte what botocore's
``generate_presigned_url`` writes, at a small part of its CPU.

Why not botocore for each URL: it runs every URL through its request pipeline (endpoint rules,
events, a signer object, the signing key derived anew) for about 0.6 ms of CPU, which with
many small objects is a good part of the client's whole cost per object. A SigV4 query
signature of a GET is fixed by AWS's specification: a canonical request (method, path, sorted
query, the host header, ``UNSIGNED-PAYLOAD``), hashed, then signed with a key derived from the
secret once per day. Nothing of the URL's shape is guessed: botocore presigns the first key,
and that URL gives the scheme, host, path prefix, credential scope and expiry. The URL this
module then writes for the same key at the same time must equal botocore's, or it is not used
at all (`Presigner.exact` is false and every URL comes from botocore).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = ["Presigner"]

_ALGORITHM = "AWS4-HMAC-SHA256"
# The query of botocore's presigned GET, in its order; the signature comes last.
_PARAMS = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
           "X-Amz-SignedHeaders", "X-Amz-Security-Token")  # fmt: skip


def _q(text: str) -> str:
    return quote(text, safe="-_.~")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


class Presigner:
    """URLs for ``key`` in the bucket of ``model_key``'s URL ``model_url`` (botocore's,
    presigned with the credentials ``access_key``/``secret_key``/``token``).
    ``fallback(key)`` is botocore's own presigning, used where this one does not match it."""

    def __init__(
        self,
        model_key: str,
        model_url: str,
        *,
        access_key: str,
        secret_key: str,
        token: str | None,
        fallback: Callable[[str], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._secret, self._fallback, self._clock = secret_key, fallback, clock
        self._day = ""
        self._key = b""
        self._at: tuple[str, tuple[str, str, str]] | None = None
        self.exact = False
        url = urlsplit(model_url)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        path_key = _key_path(model_key)
        scope = query.get("X-Amz-Credential", "").split("/")
        if (
            not url.path.endswith(path_key)
            or [k for k in query if k != "X-Amz-Signature"] != [p for p in _PARAMS if p in query]
            or query.get("X-Amz-Algorithm") != _ALGORITHM
            or query.get("X-Amz-SignedHeaders") != "host"
            or query.get("X-Amz-Security-Token") != token
            or len(scope) != 5
            or scope[0] != access_key
        ):
            return
        self._origin = f"{url.scheme}://{url.netloc}"
        self._host = url.netloc
        self._prefix = url.path[: len(url.path) - len(path_key)]
        self._region, self._service = scope[2], scope[3]
        self._access_key, self._token = access_key, token
        self._expires = query.get("X-Amz-Expires", "")
        self.exact = self._url(model_key, query.get("X-Amz-Date", "")) == model_url

    def url(self, key: str) -> str:
        if not self.exact:
            return self._fallback(key)
        return self._url(key, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock())))

    def _signing_key(self, day: str) -> bytes:
        if day != self._day:  # derived once per day, not per URL
            key = _hmac(f"AWS4{self._secret}".encode(), day)
            for part in (self._region, self._service, "aws4_request"):
                key = _hmac(key, part)
            self._day, self._key = day, key
        return self._key

    def _queries(self, amz_date: str) -> tuple[str, str, str]:
        """The scope, the canonical query and the URL's query (less the signature): the same
        for every URL signed in the same second, so made once per second."""
        if self._at and self._at[0] == amz_date:
            return self._at[1]
        scope = f"{amz_date[:8]}/{self._region}/{self._service}/aws4_request"
        params = [
            ("X-Amz-Algorithm", _ALGORITHM),
            ("X-Amz-Credential", f"{self._access_key}/{scope}"),
            ("X-Amz-Date", amz_date),
            ("X-Amz-Expires", self._expires),
            ("X-Amz-SignedHeaders", "host"),
        ]
        if self._token is not None:
            params.append(("X-Amz-Security-Token", self._token))
        canonical = "&".join(f"{_q(k)}={_q(v)}" for k, v in sorted(params))
        query = "&".join(f"{k}={_q(v)}" for k, v in params)
        self._at = (amz_date, (scope, canonical, query))
        return self._at[1]

    def _url(self, key: str, amz_date: str) -> str:
        scope, canonical_query, query = self._queries(amz_date)
        path = self._prefix + _key_path(key)
        canonical = f"GET\n{path}\n{canonical_query}\nhost:{self._host}\n\nhost\nUNSIGNED-PAYLOAD"
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        to_sign = f"{_ALGORITHM}\n{amz_date}\n{scope}\n{digest}"
        key_ = self._signing_key(amz_date[:8])
        signature = hmac.new(key_, to_sign.encode(), hashlib.sha256).hexdigest()
        return f"{self._origin}{path}?{query}&X-Amz-Signature={signature}"


def _key_path(key: str) -> str:
    # botocore's quoting of a key in the URL path ('/' and '~' stay).
    return quote(key, safe="/~")
